import ArgumentParser

/// Load generator and measurements. Subcommands arrive with the parts they measure.
struct LaminaBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lamina-bench", abstract: "Lamina benchmarks.",
        subcommands: [H2ServerCommand.self, IdleConnectionsCommand.self, IdleClientsCommand.self, TransportCompareCommand.self])
}

LaminaBench.main()
