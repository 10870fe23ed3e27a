import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire
import Testing

/// REPLICATE kind 74 (SPEC §6.5): what the merge takes of it, what an older peer gets instead,
/// and what its encoder refuses.
@Suite struct MessagePartsEditedTests {
    let kept = MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("kept".utf8)))
    let changed = MessagePart(id: UUID(), mimeType: .textPlain, content: .inline(Array("changed".utf8)))
    let gone = UUID()
    let at = HLCTimestamp(physical: 1_767_225_600_000, logical: 2, node: NodeID(3))

    let conversation = ConversationID.random()
    let message = MessageID.random()

    var edited: MessagePartsEdited {
        MessagePartsEdited(
            conversationID: conversation, messageID: message, parts: [kept, changed], set: [changed.id],
            removed: [gone], by: "alice", at: at)
    }

    @Test func theMergeTakesOnlyTheSetPartsTheRemovedIdsAndTheOrder() {
        let edit = edited.edit
        #expect(edit == MessagePartsEdit(at: at, set: [changed], removed: [gone], order: [kept.id, changed.id]))
    }

    @Test func aPeerWithoutBit20GetsKind11WithTheWholeList() throws {
        let op = ReplicatedOperation(origin: NodeID(3), counter: 9, hlc: at, payload: .partsEdited(edited))
        guard case .change(.messagePartsChanged(let whole)) = op.withWholePartLists.payload else {
            Issue.record("not kind 11: \(op.withWholePartLists.payload)")
            return
        }
        #expect(whole.parts == [kept, changed] && whole.at == at && whole.by == "alice")
        #expect(whole.conversationID == edited.conversationID && whole.messageID == edited.messageID)
        // Other operations pass unchanged.
        let other = ReplicatedOperation(
            origin: NodeID(3), counter: 10, hlc: at, payload: .user(.sessionsRevoked("bob")))
        #expect(other.withWholePartLists == other)
        // Kind 74 round-trips through REPLICATE.
        let frame = Frame.replicate(Replicate(operations: [op]))
        #expect(try Frame.decode(exactly: try frame.encoded()) == frame)
    }

    @Test func theEncoderRefusesAnEditThatRemovesAListedPartOrSetsAnUnlistedOne() {
        var removesListed = edited
        removesListed.removed = [kept.id]
        var setsUnlisted = edited
        setsUnlisted.set = [gone]
        for bad in [removesListed, setsUnlisted] {
            let frame = Frame.replicate(
                Replicate(operations: [
                    ReplicatedOperation(origin: NodeID(3), counter: 1, hlc: at, payload: .partsEdited(bad))
                ]))
            #expect(throws: WireError.self) { try frame.encoded() }
        }
    }
}
