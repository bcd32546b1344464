// swift-tools-version:6.1
//
// HabitFlow benchmarks: the benchmark clients the Benchmarks/*.sh scripts build (release) and run; they print
// figures, they are not tests. A package of its own, like swift-nio's Benchmarks/, so the product's Package.swift lists
// the product. It depends on the main package by path and uses its library products (the backend's modules that the
// root Package.swift exposes for this package). `scripts/test` builds it in debug (`swift build --package-path
// Benchmarks`, scratch path Benchmarks/.build) so it cannot rot. GRPCSwiftReference/ is yet another package.
import PackageDescription

/// The main package's settings: Swift 6 language mode (strict concurrency checking), explicit import access levels.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "HabitFlowBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "HabitFlow", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // What the benchmarks share: CPU time of processes, a service's own latency histogram from its /metrics.
        .target(
            name: "HabitFlowBenchmarkSupport",
            dependencies: [
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
            ],
            path: "Support",
            swiftSettings: swiftSettings
        ),
        // Pool round trips next to pgbench (Benchmarks/postgres.sh); prints figures, not a test.
        .executableTarget(
            name: "postgres-benchmark",
            dependencies: [
                .product(name: "HabitFlowPostgres", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "PostgresBenchmark",
            swiftSettings: swiftSettings
        ),
        // Token issue/verify costs next to the bare signatures (Benchmarks/tokens.sh); prints figures, not a test.
        .executableTarget(
            name: "tokens-benchmark",
            dependencies: [
                .product(name: "HabitFlowBase64", package: "HabitFlow"),
                .product(name: "HabitFlowCrypto", package: "HabitFlow"),
                .product(name: "HabitFlowTokens", package: "HabitFlow"),
            ],
            path: "TokensBenchmark",
            swiftSettings: swiftSettings
        ),
        // Logins per second (bcrypt cost 12) and a cheap RPC's p99 with and without login load (Benchmarks/auth.sh).
        .executableTarget(
            name: "auth-benchmark",
            dependencies: [
                .product(name: "HabitFlowAuth", package: "HabitFlow"),
                .product(name: "HabitFlowAuthProtos", package: "HabitFlow"),
                .product(name: "HabitFlowCrypto", package: "HabitFlow"),
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
                .product(name: "HabitFlowRPCClient", package: "HabitFlow"),
                .product(name: "HabitFlowServiceKit", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "AuthBenchmark",
            swiftSettings: swiftSettings
        ),
        // Week view and mark-done latency for a user with five years of entries (Benchmarks/habits.sh); prints figures.
        .executableTarget(
            name: "habits-benchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport",
                .product(name: "HabitFlowHabitsProtos", package: "HabitFlow"),
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowPostgres", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
                .product(name: "HabitFlowRPCClient", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "HabitsBenchmark",
            swiftSettings: swiftSettings
        ),
        // Goals with progress for a user with 10 goals over 5 years of entries (Benchmarks/goals.sh); prints figures.
        .executableTarget(
            name: "goals-benchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport",
                .product(name: "HabitFlowGoalsProtos", package: "HabitFlow"),
                .product(name: "HabitFlowHabitsProtos", package: "HabitFlow"),
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowPostgres", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
                .product(name: "HabitFlowRPCClient", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "GoalsBenchmark",
            swiftSettings: swiftSettings
        ),
        // The weekly leaderboard of a user with 100 friends (Benchmarks/social.sh); prints figures.
        .executableTarget(
            name: "social-benchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport",
                .product(name: "HabitFlowAuthProtos", package: "HabitFlow"),
                .product(name: "HabitFlowHabitsProtos", package: "HabitFlow"),
                .product(name: "HabitFlowSocialProtos", package: "HabitFlow"),
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowPostgres", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
                .product(name: "HabitFlowRPCClient", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "SocialBenchmark",
            swiftSettings: swiftSettings
        ),
        // The same habits RPC directly and through the gateway (Benchmarks/gateway.sh); prints figures.
        .executableTarget(
            name: "gateway-benchmark",
            dependencies: [
                "HabitFlowBenchmarkSupport",
                .product(name: "HabitFlowHabitsProtos", package: "HabitFlow"),
                .product(name: "HabitFlowInternalCredential", package: "HabitFlow"),
                .product(name: "HabitFlowRPC", package: "HabitFlow"),
                .product(name: "HabitFlowRPCClient", package: "HabitFlow"),
                .product(name: "HabitFlowSDK", package: "HabitFlow"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "GatewayBenchmark",
            swiftSettings: swiftSettings
        ),
    ]
)
