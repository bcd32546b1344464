// swift-tools-version:6.1
//
// HabitFlow backend. The folder tree is the architecture (see README.md, "Layout"):
//   Shared/CSystem/*  thin system-library modules over the C libraries (nghttp2, OpenSSL, libpq, libcrypt)
//   Shared/*          safe Swift layers on top of them: HTTP/2 sessions, crypto, Postgres, later the RPC runtime
//   Services/*        one folder per service executable; services depend on Shared, never the other way round
//   Schemas/          .proto files (the API) and SQL migrations per service
//   Tests/*           one test target per module, against real libraries, sockets and Postgres
//   Benchmarks/       benchmark clients (executables the Benchmarks/*.sh scripts run; they print figures, not tests)
//   Tools/Fuzz/       libFuzzer targets, a package of its own on this one's products (scripts/fuzz)
import PackageDescription

/// Swift 6 language mode (strict concurrency checking) for every Swift target.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The products of other packages that targets use, named once.
let swiftProtobuf: Target.Dependency = .product(name: "SwiftProtobuf", package: "swift-protobuf")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let nioPosix: Target.Dependency = .product(name: "NIOPosix", package: "swift-nio")
let nioHTTP1: Target.Dependency = .product(name: "NIOHTTP1", package: "swift-nio")
let nioEmbedded: Target.Dependency = .product(name: "NIOEmbedded", package: "swift-nio")
let prometheus: Target.Dependency = .product(name: "Prometheus", package: "swift-prometheus")
let serviceLifecycle: Target.Dependency = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let histogram: Target.Dependency = .product(name: "Histogram", package: "hdrhistogram-swift")
let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")

/// A C library as a system-library target (`Shared/CSystem/<name>`), found with pkg-config, installed from Debian.
func cLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, path: "Shared/CSystem/\(name)", pkgConfig: pkgConfig, providers: [.apt([apt])])
}

/// A library target with the package's Swift settings.
func library(
    _ name: String, path: String, exclude: [String] = [], dependencies: [Target.Dependency] = []
) -> Target {
    .target(name: name, dependencies: dependencies, path: path, exclude: exclude, swiftSettings: swiftSettings)
}

/// An executable target with the package's Swift settings.
func executable(_ name: String, path: String, dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: dependencies, path: path, swiftSettings: swiftSettings)
}

/// The generated code of one service's API (Schemas/proto/habitflow/<service>, made by scripts/generate-protos):
/// messages and service protocols, on the RPC core.
func generatedAPI(name: String, folder: String) -> Target {
    library(name, path: "Shared/Protos/\(folder)/Generated", dependencies: ["HabitFlowRPC", swiftProtobuf])
}

/// A service's executable: `Services/<folder>/Main/main.swift`, which runs the service library's definition.
/// (`scripts/stack` and the compose check find the services by the literal `name: "habitflow-<service>"`.)
func serviceExecutable(name: String, library: String, folder: String) -> Target {
    executable(name, path: "Services/\(folder)/Main", dependencies: [.target(name: library), "HabitFlowServiceKit"])
}

/// The backend's modules exposed for the fuzzing package (Tools/Fuzz/Package.swift, which depends on this one by path,
/// builds with sanitizer flags of its own and can only use products): exactly the modules it imports. Not an API for
/// apps.
let fuzzingProducts = [
    "HabitFlowArchive", "HabitFlowAuth", "HabitFlowAuthProtos", "HabitFlowBase64", "HabitFlowCompression",
    "HabitFlowCrypto", "HabitFlowGatewayProtos", "HabitFlowGoals", "HabitFlowGoalsProtos", "HabitFlowHabits",
    "HabitFlowHabitsProtos", "HabitFlowSocial", "HabitFlowSocialProtos", "HabitFlowHTTP2", "HabitFlowLocking",
    "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCServer", "HabitFlowServiceAPI", "HabitFlowServiceKit",
    "HabitFlowTokens",
]

/// A test target of `Tests/<name>`, with the package's Swift settings.
func testTarget(_ name: String, dependencies: [Target.Dependency]) -> Target {
    .testTarget(name: name, dependencies: dependencies, path: "Tests/\(name)", swiftSettings: swiftSettings)
}

let package = Package(
    name: "HabitFlow",
    platforms: [.macOS(.v15)],
    products: [
        // The client SDK for apps (Shared/SDK): sign-in, automatic token refresh, typed calls for every public RPC.
        .library(name: "HabitFlowSDK", targets: ["HabitFlowSDK"])
    ] + fuzzingProducts.map { .library(name: $0, targets: [$0]) },
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", exact: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // MARK: C libraries (system-library targets, pkg-config + apt providers)

        cLibrary("CNGHTTP2", pkgConfig: "libnghttp2", apt: "libnghttp2-dev"),
        cLibrary("COpenSSL", pkgConfig: "openssl", apt: "libssl-dev"),
        cLibrary("CLibPQ", pkgConfig: "libpq", apt: "libpq-dev"),
        cLibrary("CLibCrypt", pkgConfig: "libxcrypt", apt: "libcrypt-dev"),
        cLibrary("CZlib", pkgConfig: "zlib", apt: "zlib1g-dev"),

        // MARK: Safe Swift layers over the C libraries

        // A value behind a lock that ThreadSanitizer can see: what every layer uses instead of a bare Mutex.
        library("HabitFlowLocking", path: "Shared/Locking"),
        // Base64 and base64url, the one codec every layer uses (gRPC metadata, JOSE, page tokens).
        library("HabitFlowBase64", path: "Shared/Base64"),

        library("HabitFlowHTTP2", path: "Shared/HTTP2", dependencies: ["CNGHTTP2", "HabitFlowLocking", nioCore]),
        library("HabitFlowCrypto", path: "Shared/Crypto", dependencies: ["COpenSSL", "CLibCrypt"]),
        library("HabitFlowCompression", path: "Shared/Compression", dependencies: ["CZlib", nioCore]),
        // Streaming ZIP (deflate through HabitFlowCompression) and RFC 4180 CSV: what a user's data export is made of.
        library(
            "HabitFlowArchive", path: "Shared/Archive", exclude: ["README.md"],
            dependencies: ["HabitFlowCompression", "HabitFlowCalendar", nioCore]),
        // Calendar dates, ISO weeks and users' time zones: what "today" and "this week" mean for a user.
        library("HabitFlowCalendar", path: "Shared/Calendar", dependencies: ["HabitFlowLocking"]),
        library(
            "HabitFlowPostgres", path: "Shared/Postgres/Core",
            dependencies: [
                "HabitFlowLocking", "CLibPQ", "HabitFlowCalendar", "HabitFlowCrypto", nioCore, nioPosix, logging,
            ]),
        // Domain event envelope (Schemas/proto/habitflow/events) and the transactional outbox built on it.
        library("HabitFlowEvents", path: "Shared/Events", dependencies: ["HabitFlowRPC", swiftProtobuf]),
        library(
            "HabitFlowOutbox", path: "Shared/Postgres/Outbox",
            dependencies: [
                "HabitFlowLocking", "HabitFlowPostgres", "HabitFlowCalendar", "HabitFlowEvents", "HabitFlowCrypto",
                "HabitFlowRPC", logging, swiftProtobuf,
            ]),
        // Applies a service's migrations without starting it.
        executable(
            "habitflow-migrate", path: "Tools/Migrate",
            dependencies: ["HabitFlowOutbox", "HabitFlowPostgres", logging]),
        library("HabitFlowTLS", path: "Shared/TLS", dependencies: ["COpenSSL", nioCore]),

        // Access tokens (Ed25519 JWTs), JWK Sets and OIDC ID tokens (Google, Apple): one JOSE core shared by the auth
        // service, which issues and verifies, and the gateway, which only verifies. NIOHTTP1 + TLS fetch providers'
        // key sets over https.
        library(
            "HabitFlowTokens", path: "Shared/Tokens",
            dependencies: ["HabitFlowBase64", "HabitFlowCrypto", "HabitFlowTLS", nioCore, nioPosix, nioHTTP1]),

        // MARK: RPC runtime (gRPC over HTTP/2)

        library("HabitFlowGRPCProtos", path: "Shared/RPC/Protos", dependencies: [swiftProtobuf]),
        library(
            "HabitFlowRPC", path: "Shared/RPC/Core",
            dependencies: ["HabitFlowLocking", "HabitFlowBase64", "HabitFlowGRPCProtos", nioCore, swiftProtobuf]),
        // The health and reflection services: messages plus generated `Handler` protocols, which need HabitFlowRPC.
        // Apart from HabitFlowGRPCProtos (google.rpc messages, used by the core), so there is no dependency cycle.
        library(
            "HabitFlowGRPCSideServiceProtos", path: "Shared/RPC/SideServiceProtos",
            dependencies: ["HabitFlowRPC", swiftProtobuf]),

        // The web protocols' framing, without sockets: gRPC-Web (binary and text), Connect unary, CORS.
        library(
            "HabitFlowRPCWeb", path: "Shared/RPC/Web",
            dependencies: ["HabitFlowBase64", "HabitFlowRPC", "HabitFlowGRPCProtos", nioCore, swiftProtobuf]),
        library(
            "HabitFlowRPCServer", path: "Shared/RPC/Server",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowRPC", "HabitFlowGRPCProtos", "HabitFlowHTTP2",
                "HabitFlowTLS", "HabitFlowCompression", "HabitFlowRPCWeb", nioCore, nioPosix, nioHTTP1, logging,
                swiftProtobuf,
            ]),

        library(
            "HabitFlowRPCClient", path: "Shared/RPC/Client",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowRPC", "HabitFlowGRPCProtos", "HabitFlowHTTP2",
                "HabitFlowTLS", "HabitFlowCompression", nioCore, nioPosix, logging, swiftProtobuf,
            ]),

        // Forwarding whole services to another server without decoding their messages (the gateway), with the
        // event-loop fast path for unary calls that joins a server connection to a client connection.
        library(
            "HabitFlowRPCProxy", path: "Shared/RPC/Proxy",
            dependencies: ["HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", nioCore]),

        library(
            "HabitFlowRPCSideServices", path: "Shared/RPC/SideServices",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowRPC", "HabitFlowGRPCSideServiceProtos", swiftProtobuf,
            ]),

        // The internal credential: how services know a call comes from another HabitFlow process, and for which user.
        library(
            "HabitFlowInternalCredential", path: "Shared/InternalCredential",
            dependencies: ["HabitFlowLocking", "HabitFlowCrypto", "HabitFlowRPC"]),

        // What handlers share: request validation into BadRequest violations, page sizes and opaque page tokens.
        library(
            "HabitFlowServiceAPI", path: "Shared/ServiceAPI",
            dependencies: ["HabitFlowBase64", "HabitFlowCalendar", "HabitFlowCrypto", "HabitFlowLocking", "HabitFlowRPC"]),

        // MARK: Service kit (what every service process shares: configuration, the internal credential, the host)

        library(
            "HabitFlowServiceKit", path: "Shared/Service",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowCalendar", "HabitFlowCrypto",
                "HabitFlowEvents", "HabitFlowGRPCSideServiceProtos", "HabitFlowOutbox", "HabitFlowPostgres",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", "HabitFlowRPCSideServices",
                "HabitFlowServiceAPI", logging, nioCore, nioHTTP1, nioPosix, prometheus, serviceLifecycle,
            ]),

        // MARK: Services (one library target with the logic, one tiny executable each)

        // Generated code of Schemas/proto/habitflow/auth (scripts/generate-protos): used by auth, the gateway and the SDK.
        generatedAPI(name: "HabitFlowAuthProtos", folder: "Auth"),
        library(
            "HabitFlowAuth", path: "Services/Auth/Sources",
            dependencies: [
                "HabitFlowLocking", "HabitFlowServiceAPI", "HabitFlowInternalCredential", "HabitFlowBase64",
                "HabitFlowAuthProtos", "HabitFlowCalendar", "HabitFlowCrypto", "HabitFlowEvents", "HabitFlowOutbox",
                "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowServiceKit", "HabitFlowTokens", logging, nioCore,
                nioPosix, swiftProtobuf,
            ]),
        serviceExecutable(name: "habitflow-auth", library: "HabitFlowAuth", folder: "Auth"),
        generatedAPI(name: "HabitFlowHabitsProtos", folder: "Habits"),
        library(
            "HabitFlowHabits", path: "Services/Habits/Sources",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowServiceAPI", "HabitFlowCalendar",
                "HabitFlowCrypto", "HabitFlowEvents", "HabitFlowHabitsProtos", "HabitFlowOutbox", "HabitFlowPostgres",
                "HabitFlowRPC", "HabitFlowServiceKit", logging, swiftProtobuf,
            ]),
        serviceExecutable(name: "habitflow-habits", library: "HabitFlowHabits", folder: "Habits"),

        generatedAPI(name: "HabitFlowGoalsProtos", folder: "Goals"),
        library(
            "HabitFlowGoals", path: "Services/Goals/Sources",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowServiceAPI", "HabitFlowCalendar",
                "HabitFlowCrypto", "HabitFlowEvents", "HabitFlowGoalsProtos", "HabitFlowHabitsProtos",
                "HabitFlowOutbox", "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowServiceKit",
                "HabitFlowSocialProtos", logging, swiftProtobuf,
            ]),
        serviceExecutable(name: "habitflow-goals", library: "HabitFlowGoals", folder: "Goals"),

        generatedAPI(name: "HabitFlowSocialProtos", folder: "Social"),
        library(
            "HabitFlowSocial", path: "Services/Social/Sources",
            dependencies: [
                "HabitFlowInternalCredential", "HabitFlowServiceAPI", "HabitFlowCalendar", "HabitFlowCrypto",
                "HabitFlowEvents", "HabitFlowSocialProtos", "HabitFlowHabitsProtos", "HabitFlowAuthProtos",
                "HabitFlowOutbox", "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowServiceKit",
                logging, swiftProtobuf,
            ]),
        serviceExecutable(name: "habitflow-social", library: "HabitFlowSocial", folder: "Social"),

        // Generated code of Schemas/proto/habitflow/gateway (the gateway's own API: the dashboard).
        generatedAPI(name: "HabitFlowGatewayProtos", folder: "Gateway"),
        library(
            "HabitFlowGateway", path: "Services/Gateway/Sources",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowArchive", "HabitFlowAuthProtos",
                "HabitFlowCalendar", "HabitFlowCrypto", "HabitFlowEvents", "HabitFlowGRPCSideServiceProtos",
                "HabitFlowGatewayProtos", "HabitFlowGoalsProtos", "HabitFlowHabitsProtos", "HabitFlowSocialProtos",
                "HabitFlowPublicAPI", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCProxy", "HabitFlowRPCServer",
                "HabitFlowRPCSideServices", "HabitFlowRPCWeb", "HabitFlowServiceAPI", "HabitFlowServiceKit",
                "HabitFlowTLS", "HabitFlowTokens", logging, prometheus, swiftProtobuf,
            ]),
        serviceExecutable(name: "habitflow-gateway", library: "HabitFlowGateway", folder: "Gateway"),

        // Container health check of the compose stack (grpc.health.v1 Check; exit status 0 when SERVING).
        executable(
            "habitflow-healthcheck", path: "Tools/HealthCheck",
            dependencies: ["HabitFlowGRPCSideServiceProtos", "HabitFlowRPC", "HabitFlowRPCClient", logging]),

        // MARK: Client SDK (what apps link: talks to the gateway only)

        // What the gateway and the SDK must agree on about the public API (which methods need no access token).
        library("HabitFlowPublicAPI", path: "Shared/API", dependencies: ["HabitFlowAuthProtos"]),

        library(
            "HabitFlowSDK", path: "Shared/SDK",
            dependencies: [
                "HabitFlowLocking", "HabitFlowAuthProtos", "HabitFlowPublicAPI", "HabitFlowGatewayProtos",
                "HabitFlowGoalsProtos", "HabitFlowHabitsProtos", "HabitFlowSocialProtos", "HabitFlowRPC",
                "HabitFlowRPCClient", "HabitFlowTLS", logging, nioCore, swiftProtobuf,
            ]),

        // MARK: Interop (grpc/grpc's interop test service, Tools/Interop)

        library("GRPCInteropTesting", path: "Tools/Interop/Testing", dependencies: ["HabitFlowRPC", swiftProtobuf]),
        executable(
            "interop-server", path: "Tools/Interop/Server",
            dependencies: [
                "GRPCInteropTesting", "HabitFlowGRPCSideServiceProtos", "HabitFlowRPC", "HabitFlowRPCServer",
                "HabitFlowRPCSideServices", "HabitFlowTLS", logging,
            ]),
        executable(
            "interop-client", path: "Tools/Interop/Client",
            dependencies: ["GRPCInteropTesting", "HabitFlowHTTP2", "HabitFlowRPC", "HabitFlowRPCClient", logging, nioPosix]),

        // The product in one walkthrough through the SDK, against a running stack (scripts/demo).
        executable("habitflow-demo", path: "Tools/Demo", dependencies: ["HabitFlowSDK", "HabitFlowArchive"]),

        // MARK: Load-test driver (Tools/Load): the engine, scenarios and reports as a library, a tiny executable

        library(
            "HabitFlowLoad", path: "Tools/Load/Sources",
            dependencies: [
                "HabitFlowLocking", "GRPCInteropTesting", "HabitFlowAuthProtos", "HabitFlowCrypto",
                "HabitFlowGatewayProtos", "HabitFlowHabitsProtos", "HabitFlowRPC", "HabitFlowRPCClient",
                "HabitFlowInternalCredential", argumentParser, histogram, logging, swiftProtobuf,
            ]),
        executable("habitflow-load", path: "Tools/Load/Main", dependencies: ["HabitFlowLoad"]),

        // MARK: Benchmark clients (Benchmarks/): what the Benchmarks/*.sh scripts build in release and run; they print
        // figures, they are not tests. Here rather than in a package of their own so that `scripts/test` compiles
        // them on top of its own build (they cannot rot) instead of compiling the backend a second time.

        // What the benchmarks share: CPU time of processes, a service's own latency histogram from its /metrics.
        library(
            "HabitFlowBenchmarkSupport", path: "Benchmarks/Support",
            dependencies: ["HabitFlowInternalCredential", "HabitFlowRPC"]),
        // Pool round trips next to pgbench (Benchmarks/postgres.sh).
        executable(
            "postgres-benchmark", path: "Benchmarks/PostgresBenchmark", dependencies: ["HabitFlowPostgres", logging]),
        // Token issue/verify costs next to the bare signatures (Benchmarks/tokens.sh).
        executable(
            "tokens-benchmark", path: "Benchmarks/TokensBenchmark",
            dependencies: ["HabitFlowBase64", "HabitFlowCrypto", "HabitFlowTokens"]),
        // Logins per second (bcrypt cost 12) and a cheap RPC's p99 with and without login load (Benchmarks/auth.sh).
        executable(
            "auth-benchmark", path: "Benchmarks/AuthBenchmark",
            dependencies: [
                "HabitFlowAuth", "HabitFlowAuthProtos", "HabitFlowCrypto", "HabitFlowInternalCredential",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowServiceKit", logging, nioCore, nioPosix,
            ]),
        // Week view and mark-done latency for a user with five years of entries (Benchmarks/habits.sh).
        executable(
            "habits-benchmark", path: "Benchmarks/HabitsBenchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport", "HabitFlowHabitsProtos", "HabitFlowInternalCredential",
                "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", logging,
            ]),
        // Goals with progress for a user with 10 goals over 5 years of entries (Benchmarks/goals.sh).
        executable(
            "goals-benchmark", path: "Benchmarks/GoalsBenchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport", "HabitFlowGoalsProtos", "HabitFlowHabitsProtos",
                "HabitFlowInternalCredential", "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", logging,
            ]),
        // The weekly leaderboard of a user with 100 friends (Benchmarks/social.sh).
        executable(
            "social-benchmark", path: "Benchmarks/SocialBenchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport", "HabitFlowAuthProtos", "HabitFlowHabitsProtos", "HabitFlowSocialProtos",
                "HabitFlowInternalCredential", "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", logging,
            ]),
        // The same habits RPC directly and through the gateway (Benchmarks/gateway.sh).
        executable(
            "gateway-benchmark", path: "Benchmarks/GatewayBenchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport", "HabitFlowHabitsProtos", "HabitFlowInternalCredential", "HabitFlowRPC",
                "HabitFlowRPCClient", "HabitFlowSDK", logging,
            ]),

        // MARK: Tests

        // Helpers shared by several test targets (a throwaway PKI made with the openssl command line, a log capture).
        library(
            "HabitFlowTestSupport", path: "Tests/Support",
            dependencies: [
                "HabitFlowLocking", "HabitFlowCalendar", "HabitFlowGRPCProtos", "HabitFlowInternalCredential",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", logging, nioEmbedded,
            ]),

        testTarget(
            "HTTP2Tests",
            dependencies: ["HabitFlowHTTP2", "HabitFlowLocking", nioCore, nioEmbedded, nioPosix]),
        testTarget(
            "RPCCoreTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowRPC", "HabitFlowGRPCProtos", "HabitFlowCompression",
                nioCore,
            ]),
        testTarget(
            "RPCWebTests",
            dependencies: ["HabitFlowRPC", "HabitFlowRPCWeb", "HabitFlowGRPCProtos", nioCore, swiftProtobuf]),
        testTarget(
            "RPCServerTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowRPC", "HabitFlowRPCServer", "HabitFlowHTTP2",
                "HabitFlowGRPCProtos", "HabitFlowTestSupport", "HabitFlowRPCWeb", nioCore, nioEmbedded, nioPosix,
                nioHTTP1, logging, swiftProtobuf,
            ]),
        testTarget(
            "RPCClientTests",
            dependencies: [
                "HabitFlowLocking", "GRPCInteropTesting", "HabitFlowTestSupport", "HabitFlowGRPCProtos", "HabitFlowHTTP2",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCProxy", "HabitFlowRPCServer", "HabitFlowTLS", nioCore,
                nioEmbedded, nioPosix, logging,
                swiftProtobuf,
            ]),
        testTarget(
            "ServiceAPITests",
            dependencies: ["HabitFlowBase64", "HabitFlowCalendar", "HabitFlowRPC", "HabitFlowServiceAPI"]),
        testTarget(
            "CryptoTests",
            dependencies: ["HabitFlowCrypto", "HabitFlowTestSupport"]),
        // ZIP and CSV read back by Python's zipfile and csv modules (and unzip, when installed).
        testTarget(
            "ArchiveTests",
            dependencies: [
                "HabitFlowArchive", "HabitFlowCalendar", "HabitFlowCompression", "HabitFlowCrypto",
                "HabitFlowTestSupport", nioCore,
            ]),
        // Tokens against keys the tests generate, and key sets fetched from an https server started in the test.
        testTarget(
            "TokensTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowBase64", "HabitFlowTokens", "HabitFlowCrypto", "HabitFlowTLS",
                "HabitFlowTestSupport", nioCore, nioPosix, nioHTTP1,
            ]),
        testTarget(
            "PostgresTests",
            dependencies: [
                "HabitFlowCalendar", "HabitFlowTestSupport", "HabitFlowPostgres", "HabitFlowOutbox", "HabitFlowEvents",
                "HabitFlowHTTP2", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", logging, nioPosix,
                swiftProtobuf,
            ]),
        testTarget(
            "TLSTests",
            dependencies: ["HabitFlowTLS", "HabitFlowTestSupport", nioCore, nioPosix]),
        testTarget(
            "ServiceKitTests",
            dependencies: [
                "HabitFlowInternalCredential", "HabitFlowTestSupport", "GRPCInteropTesting", "HabitFlowEvents",
                "HabitFlowGRPCSideServiceProtos", "HabitFlowLocking", "HabitFlowOutbox", "HabitFlowPostgres",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowServiceKit", serviceLifecycle, logging, swiftProtobuf,
            ]),
        testTarget(
            "AuthTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowServiceAPI", "HabitFlowInternalCredential", "HabitFlowBase64",
                "HabitFlowAuth", "HabitFlowAuthProtos", "HabitFlowCrypto", "HabitFlowEvents", "HabitFlowPostgres",
                "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowServiceKit", "HabitFlowTestSupport", "HabitFlowTokens",
                logging, nioCore, nioPosix, swiftProtobuf,
            ]),
        // Starts auth, habits, goals and the gateway in-process on free ports, against the test Postgres.
        library(
            "HabitFlowStackTestSupport", path: "Tests/StackSupport",
            dependencies: [
                "HabitFlowAuth", "HabitFlowAuthProtos", "HabitFlowGateway", "HabitFlowGoals", "HabitFlowHabits",
                "HabitFlowSocial", "HabitFlowRPCClient",
                "HabitFlowServiceKit", "HabitFlowTestSupport", logging,
            ]),
        testTarget(
            "GatewayTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowAuthProtos", "HabitFlowCrypto",
                "HabitFlowGRPCProtos", "HabitFlowGRPCSideServiceProtos", "HabitFlowGateway", "HabitFlowGatewayProtos",
                "HabitFlowGoalsProtos", "HabitFlowHabitsProtos", "HabitFlowPostgres", "HabitFlowRPC",
                "HabitFlowRPCClient", "HabitFlowServiceAPI", "HabitFlowServiceKit", "HabitFlowSocialProtos",
                "HabitFlowStackTestSupport", "HabitFlowTestSupport", "HabitFlowTokens", logging, prometheus,
                swiftProtobuf,
            ]),
        testTarget(
            "SDKTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowArchive", "HabitFlowAuthProtos", "HabitFlowGatewayProtos",
                "HabitFlowGoalsProtos", "HabitFlowHabitsProtos", "HabitFlowRPC", "HabitFlowSDK",
                "HabitFlowStackTestSupport", "HabitFlowTestSupport", swiftProtobuf,
            ]),
        testTarget(
            "HabitsTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowCalendar", "HabitFlowTestSupport",
                "HabitFlowEvents", "HabitFlowGRPCProtos", "HabitFlowHabits", "HabitFlowHabitsProtos",
                "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", "HabitFlowServiceAPI",
                "HabitFlowServiceKit", logging, swiftProtobuf,
            ]),
        testTarget(
            "GoalsTests",
            dependencies: [
                "HabitFlowInternalCredential", "HabitFlowCalendar", "HabitFlowTestSupport", "HabitFlowEvents",
                "HabitFlowGRPCProtos", "HabitFlowGoals", "HabitFlowGoalsProtos", "HabitFlowHabits",
                "HabitFlowHabitsProtos", "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient",
                "HabitFlowRPCServer", "HabitFlowServiceAPI", "HabitFlowServiceKit", logging, swiftProtobuf,
            ]),
        testTarget(
            "SocialTests",
            dependencies: [
                "HabitFlowInternalCredential", "HabitFlowCalendar", "HabitFlowTestSupport", "HabitFlowEvents",
                "HabitFlowGRPCProtos", "HabitFlowSocial", "HabitFlowSocialProtos", "HabitFlowHabits",
                "HabitFlowHabitsProtos", "HabitFlowAuth", "HabitFlowAuthProtos", "HabitFlowGoals", "HabitFlowGoalsProtos",
                "HabitFlowPostgres", "HabitFlowRPC",
                "HabitFlowRPCClient", "HabitFlowRPCServer", "HabitFlowServiceKit", logging, swiftProtobuf,
            ]),
        testTarget(
            "CodegenTests",
            dependencies: ["GRPCInteropTesting", "HabitFlowRPC", nioCore, swiftProtobuf]),
        testTarget(
            "LoadTests",
            dependencies: [
                "HabitFlowLocking", "HabitFlowInternalCredential", "HabitFlowCalendar", "HabitFlowLoad",
                "GRPCInteropTesting", "HabitFlowAuth", "HabitFlowGateway", "HabitFlowHabits", "HabitFlowHabitsProtos",
                "HabitFlowPostgres", "HabitFlowRPC", "HabitFlowRPCClient", "HabitFlowRPCServer", "HabitFlowServiceKit",
                "HabitFlowTestSupport", logging, swiftProtobuf,
            ]),
    ]
)
