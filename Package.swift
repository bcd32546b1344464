// swift-tools-version:6.1
//
// HabitFlow backend. The folder tree is the architecture (see README.md, "Layout"):
//   Shared/CSystem/*  thin system-library modules over the C libraries (nghttp2, OpenSSL, libpq, libcrypt)
//   Shared/*          safe Swift layers on top of them: HTTP/2 sessions, crypto, Postgres, later the RPC runtime
//   Services/*        one folder per service executable; services depend on Shared, never the other way round
//   Schemas/          .proto files (the API) and SQL migrations per service
//   Tests/*           one test target per module, against real libraries, sockets and Postgres
import PackageDescription

/// Swift 6 language mode (strict concurrency checking) for every Swift target.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "HabitFlow",
    platforms: [.macOS(.v15)],
    products: [],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // MARK: C libraries (system-library targets, pkg-config + apt providers)

        .systemLibrary(
            name: "CNGHTTP2",
            path: "Shared/CSystem/CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            path: "Shared/CSystem/COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            path: "Shared/CSystem/CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CLibCrypt",
            path: "Shared/CSystem/CLibCrypt",
            pkgConfig: "libxcrypt",
            providers: [.apt(["libcrypt-dev"])]
        ),

        // MARK: Safe Swift layers over the C libraries

        .target(
            name: "HabitFlowHTTP2",
            dependencies: [
                "CNGHTTP2",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Shared/HTTP2",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HabitFlowCrypto",
            dependencies: ["COpenSSL", "CLibCrypt"],
            path: "Shared/Crypto",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HabitFlowPostgres",
            dependencies: ["CLibPQ"],
            path: "Shared/Postgres",
            swiftSettings: swiftSettings
        ),

        // MARK: Tests

        .testTarget(
            name: "HTTP2Tests",
            dependencies: ["HabitFlowHTTP2", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tests/HTTP2Tests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CryptoTests",
            dependencies: ["HabitFlowCrypto"],
            path: "Tests/CryptoTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PostgresTests",
            dependencies: ["HabitFlowPostgres"],
            path: "Tests/PostgresTests",
            swiftSettings: swiftSettings
        ),
    ]
)
