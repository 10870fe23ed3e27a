import LaminaNode
import Testing

@Suite struct EventLoopDefaultTests {
    @Test func oneLoopPerCoreButTheWritersAndAtLeastOne() {
        #expect(NodeServerConfiguration.defaultEventLoops(cores: 1) == 1)
        #expect(NodeServerConfiguration.defaultEventLoops(cores: 2) == 1)
        #expect(NodeServerConfiguration.defaultEventLoops(cores: 8) == 7)
    }
}
