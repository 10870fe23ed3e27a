import LaminaMerge
import LaminaModel
import Testing

@Suite struct RecipientStatusTests {
    let conversation = Gen.conversations[0]
    static func t(_ p: UInt64) -> HLCTimestamp { HLCTimestamp(physical: p, logical: 0, node: NodeID(1)) }
    func stamp(_ i: Int, position: HLCTimestamp?) -> MessageStamp {
        MessageStamp(id: Gen.messages[i], conversation: conversation, sender: "u1", position: position)
    }

    @Test func statusesOnlyMoveUp() {
        let key = MessageUserKey(message: Gen.messages[0], user: "u2")
        let lattice = RecipientStatusLattice([.status(key, .read), .status(key, .delivered), .status(key, .sent)])
        #expect(lattice.statuses[key] == .read)
        #expect(
            RecipientStatusLattice([.status(key, .delivered)]).status(of: stamp(0, position: Self.t(5)), for: "u2")
                == .delivered)
    }

    @Test func theSenderHasReadTheirOwnMessageAndOthersStartPendingThenSent() {
        let lattice = RecipientStatusLattice()
        #expect(lattice.status(of: stamp(0, position: nil), for: "u1") == .read)
        #expect(lattice.status(of: stamp(0, position: nil), for: "u2") == .pending)
        #expect(lattice.status(of: stamp(0, position: Self.t(5)), for: "u2") == .sent)
    }

    @Test func markAllReadCoversMessagesUpToItsPosition() {
        let lattice = RecipientStatusLattice([
            .readUpTo(ConversationUserKey(conversation: conversation, user: "u2"), Self.t(10))
        ])
        #expect(lattice.status(of: stamp(0, position: Self.t(9)), for: "u2") == .read)
        #expect(lattice.status(of: stamp(1, position: Self.t(10)), for: "u2") == .read)
        #expect(lattice.status(of: stamp(2, position: Self.t(11)), for: "u2") == .sent)
        #expect(lattice.status(of: stamp(0, position: Self.t(9)), for: "u3") == .sent)
    }

    @Test func withReceiptsDisabledOthersAreReportedAsUndetermined() {
        let key = MessageUserKey(message: Gen.messages[0], user: "u2")
        let lattice = RecipientStatusLattice([.status(key, .read)])
        let message = stamp(0, position: Self.t(5))
        let hidden = lattice.report(
            of: message, viewer: "u3", participants: ["u1", "u2", "u3"], receiptsEnabled: false)
        #expect(hidden == ["u1": .invalid, "u2": .invalid, "u3": .sent])
        let own = lattice.report(of: message, viewer: "u2", participants: ["u1", "u2", "u3"], receiptsEnabled: false)
        #expect(own["u2"] == .read && own["u1"] == .invalid)
        let shown = lattice.report(of: message, viewer: "u3", participants: ["u1", "u2", "u3"], receiptsEnabled: true)
        #expect(shown == ["u1": .read, "u2": .read, "u3": .sent])
    }

    /// Layer's two switches (SPEC §6.2): delivery off, sent until read; read off, read once
    /// delivered (implicitly read); both off, undetermined; the viewer's own status as it is.
    @Test func theReceiptSwitchesDecideWhatOthersAreShown() {
        let cases: [(delivery: Bool, read: Bool, shown: [RecipientStatus])] = [
            (true, true, [.sent, .delivered, .read]),
            (false, true, [.sent, .sent, .read]),
            (true, false, [.sent, .read, .read]),
            (false, false, [.invalid, .invalid, .invalid]),
        ]
        for c in cases {
            let shown = [RecipientStatus.sent, .delivered, .read].map {
                RecipientStatusLattice.reported(
                    $0, of: "u2", viewer: "u1", deliveryReceipts: c.delivery, readReceipts: c.read)
            }
            #expect(shown == c.shown, "delivery \(c.delivery), read \(c.read)")
            let own = [RecipientStatus.sent, .delivered, .read].map {
                RecipientStatusLattice.reported(
                    $0, of: "u1", viewer: "u1", deliveryReceipts: c.delivery, readReceipts: c.read)
            }
            #expect(own == [.sent, .delivered, .read])
        }
    }

    @Test func applicationsCanOnlyMarkRead() throws {
        try RecipientStatusLattice.checkApplicationStatus(.read)
        for status in RecipientStatus.allCases where status != .read {
            #expect(throws: MergeError.self) { try RecipientStatusLattice.checkApplicationStatus(status) }
        }
        #expect(
            RecipientStatusLattice.markRead(Gen.messages[1], by: "u2")
                == .status(MessageUserKey(message: Gen.messages[1], user: "u2"), .read))
    }
}
