// swift-tools-version:6.1
//
// HabitFlow fuzz targets: libFuzzer harnesses (`LLVMFuzzerTestOneInput`) for the code that reads what clients send.
// A package of its own, on the main package's library products (by path): the main package's build stays as it is,
// and `scripts/fuzz` builds this one in release with `--sanitize=fuzzer --sanitize=address`
// into a folder of its own (.build-fuzz). Each target is one executable with no `main` (libFuzzer brings it); see
// README.md for the targets, the seed corpus and how to run them.
import PackageDescription

/// The main package's settings: Swift 6 language mode (strict concurrency checking), explicit import access levels.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

func habitFlow(_ name: String) -> Target.Dependency { .product(name: name, package: "HabitFlow") }
let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let nioEmbedded: Target.Dependency = .product(name: "NIOEmbedded", package: "swift-nio")
let swiftProtobuf: Target.Dependency = .product(name: "SwiftProtobuf", package: "swift-protobuf")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

/// One fuzz target: `Tools/Fuzz/<folder>/`, built as the executable `fuzz-<name>`, seeds in `Corpus/<name>/`.
func fuzzTarget(_ name: String, folder: String, dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: "fuzz-\(name)", dependencies: ["HabitFlowFuzzSupport"] + dependencies, path: folder,
        swiftSettings: swiftSettings)
}

let package = Package(
    name: "HabitFlowFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "HabitFlow", path: "../.."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // What every harness shares: reading structured values out of the fuzzer's bytes, writing its seeds.
        .target(name: "HabitFlowFuzzSupport", path: "Support", swiftSettings: swiftSettings),

        // gRPC Length-Prefixed-Message deframing (and gzip'd messages), fed in pieces of any size.
        fuzzTarget(
            "deframer", folder: "Deframer",
            dependencies: [habitFlow("HabitFlowRPC"), habitFlow("HabitFlowCompression"), nioCore]),
        // A whole server connection (nghttp2 session, gRPC calls, handlers) on an EmbeddedChannel, after the preface.
        fuzzTarget(
            "http2-server", folder: "HTTP2Server",
            dependencies: [
                habitFlow("HabitFlowCompression"), habitFlow("HabitFlowHTTP2"), habitFlow("HabitFlowRPC"),
                habitFlow("HabitFlowRPCServer"), logging, nioCore, nioEmbedded, swiftProtobuf,
            ]),
        // Every public request message, through the services' own methods: decoding and validation, no database.
        fuzzTarget(
            "requests", folder: "Requests",
            dependencies: [
                habitFlow("HabitFlowAuth"), habitFlow("HabitFlowAuthProtos"), habitFlow("HabitFlowGatewayProtos"),
                habitFlow("HabitFlowGoals"), habitFlow("HabitFlowGoalsProtos"), habitFlow("HabitFlowHabits"),
                habitFlow("HabitFlowHabitsProtos"), habitFlow("HabitFlowLocking"), habitFlow("HabitFlowPostgres"),
                habitFlow("HabitFlowRPC"), habitFlow("HabitFlowServiceAPI"), habitFlow("HabitFlowServiceKit"),
                habitFlow("HabitFlowSocial"), habitFlow("HabitFlowSocialProtos"), logging, nioCore, swiftProtobuf,
            ]),
        // Access tokens and OIDC ID tokens: parsing, key sets, and verification of tokens signed by the harness.
        fuzzTarget(
            "jwt", folder: "JWT",
            dependencies: [habitFlow("HabitFlowBase64"), habitFlow("HabitFlowCrypto"), habitFlow("HabitFlowTokens")]),
        // Page tokens and change-feed cursors: decoding what clients send back, and the encode/decode round trip.
        fuzzTarget(
            "page-token", folder: "PageToken",
            dependencies: [
                habitFlow("HabitFlowBase64"), habitFlow("HabitFlowCrypto"), habitFlow("HabitFlowServiceAPI"),
            ]),
        // The export's CSV records and ZIP entry names, read back by a reference parser.
        fuzzTarget(
            "csv", folder: "CSV",
            dependencies: [habitFlow("HabitFlowArchive"), habitFlow("HabitFlowCompression"), nioCore]),
    ]
)
