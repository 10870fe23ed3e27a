import ArgumentParser

/// Load generator and measurements. Subcommands arrive with the parts they measure.
@main
struct LaminaBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lamina-bench", abstract: "Lamina benchmarks.",
        subcommands: [
            CodecBenchmark.self, StorageBenchmark.self,
            H2ServerCommand.self, IdleConnectionsCommand.self, IdleClientsCommand.self, TransportCompareCommand.self,
            NodeLoadCommand.self, NodeCrashCommand.self,
            RateCommand.self, WebSocketRateCommand.self, SDKSendCommand.self, GrowCommand.self, SyncFloorCommand.self,
            CatchupCommand.self,
            FirstSyncCommand.self, OneThreadSyncCommand.self, ClosedCommand.self, ContentTransferCommand.self,
            SDKContentCommand.self,
            ServerAPIBenchCommand.self, ResourcesCommand.self, ReplicationCommand.self, PushBenchCommand.self,
            WebhookBenchCommand.self, PresenceCommand.self, ChannelCommand.self, DeviceSearchCommand.self,
            NodeSearchCommand.self, ReactionCommand.self,
        ]
    )
}
