// swift-tools-version:6.1
//
// Code generators, in a package of their own so the main build and CI do not pay for swift-protobuf's plugin
// library. scripts/generate-protos builds them and runs protoc; generated code is committed.
import PackageDescription

let package = Package(
    name: "HabitFlowCodegen",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0")
    ],
    targets: [
        .executableTarget(
            name: "protoc-gen-habitflow",
            dependencies: [.product(name: "SwiftProtobufPluginLibrary", package: "swift-protobuf")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
