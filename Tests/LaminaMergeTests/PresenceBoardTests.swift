import LaminaMerge
import LaminaModel
import Testing

@Suite struct PresenceBoardTests {
    let n1 = NodeID(1)
    let n2 = NodeID(2)

    func at(_ p: UInt64, _ node: NodeID) -> HLCTimestamp { HLCTimestamp(physical: p, logical: 0, node: node) }

    @Test func offlineWithoutDevicesAvailableWithoutChoice() {
        var board = PresenceBoard()
        #expect(board.visibleStatus == .offline)
        board.apply(PresenceReport(node: n1, devices: 1, choice: nil, at: at(1, n1)))
        #expect(board.visibleStatus == .available)
        #expect(board.ownStatus == .available)
        board.apply(PresenceReport(node: n1, devices: 0, choice: nil, at: at(2, n1)))
        #expect(board.visibleStatus == .offline)
        #expect(!board.isOnline)
    }

    @Test func invisibleShowsOfflineToOthersOnly() {
        let board = PresenceBoard([
            PresenceReport(
                node: n1, devices: 2, choice: PresenceChoice(status: .invisible, at: at(3, n1)), at: at(3, n1))
        ])
        #expect(board.ownStatus == .invisible)
        #expect(board.visibleStatus == .offline)
    }

    @Test func latestChoiceOnAnyNodeWinsAndAStaleReportChangesNothing() {
        var board = PresenceBoard()
        board.apply(
            PresenceReport(node: n1, devices: 1, choice: PresenceChoice(status: .busy, at: at(5, n1)), at: at(5, n1)))
        board.apply(
            PresenceReport(node: n2, devices: 1, choice: PresenceChoice(status: .away, at: at(7, n2)), at: at(7, n2)))
        #expect(board.visibleStatus == .away)
        // n1's older report (before its busy choice) arrives late: nothing changes.
        board.apply(PresenceReport(node: n1, devices: 0, choice: nil, at: at(4, n1)))
        #expect(board.visibleStatus == .away)
        // n2's devices leave; n1 still has one, and the latest choice (away, from n2) stays the user's.
        board.apply(
            PresenceReport(node: n2, devices: 0, choice: PresenceChoice(status: .away, at: at(7, n2)), at: at(8, n2)))
        #expect(board.isOnline)
        #expect(board.visibleStatus == .away)
    }

    @Test func aggregateIsIndependentOfOrderAndDuplicates() {
        let reports = [
            PresenceReport(node: n1, devices: 1, choice: PresenceChoice(status: .busy, at: at(2, n1)), at: at(2, n1)),
            PresenceReport(node: n2, devices: 0, choice: nil, at: at(9, n2)),
            PresenceReport(node: n2, devices: 1, choice: nil, at: at(3, n2)),
            PresenceReport(node: n1, devices: 1, choice: PresenceChoice(status: .away, at: at(6, n1)), at: at(6, n1)),
        ]
        let reference = PresenceBoard(reports)
        #expect(reference.visibleStatus == .away)
        for order in [reports.reversed(), reports + reports, [reports[2], reports[0], reports[3], reports[1]]] {
            #expect(PresenceBoard(order) == reference)
        }
    }
}
