import Foundation
import LaminaMerge
import LaminaModel
import Testing

@Suite struct MessagePartsMapTests {
    let one = Gen.uuid(0x61)
    let two = Gen.uuid(0x62)
    let three = Gen.uuid(0x63)

    func at(_ ms: UInt64, _ node: UInt64 = 1) -> HLCTimestamp {
        HLCTimestamp(physical: ms, logical: 0, node: NodeID(node))
    }

    func part(_ id: UUID, _ text: String) -> MessagePart {
        MessagePart(id: id, mimeType: .textPlain, content: .inline(Array(text.utf8)))
    }

    var sent: [MessagePart] { [part(one, "a"), part(two, "b")] }

    @Test func concurrentEditsOfDifferentPartsBothSurvive() {
        let send = MessagePartsEdit.send(sent, at: at(1))
        let onA = MessagePartsEdit.diff(from: sent, to: [part(one, "A"), part(two, "b")], at: at(5, 1))
        let onB = MessagePartsEdit.diff(from: sent, to: [part(one, "a"), part(two, "B")], at: at(6, 2))
        #expect(onA.set == [part(one, "A")] && onA.removed.isEmpty)
        let ab = MessagePartsMap([send, onA, onB])
        let ba = MessagePartsMap([onB, send, onA])
        #expect(ab == ba)
        #expect(ab.parts == [part(one, "A"), part(two, "B")])
        #expect(ab.latest == at(6, 2))
    }

    @Test func aLaterRemovalBeatsAnEarlierEditAndViceVersa() {
        let send = MessagePartsEdit.send(sent, at: at(1))
        let edit = MessagePartsEdit.diff(from: sent, to: [part(one, "a"), part(two, "B")], at: at(5, 1))
        let removal = MessagePartsEdit.diff(from: sent, to: [part(one, "a")], at: at(6, 2))
        #expect(removal.removed == [two] && removal.set.isEmpty)
        #expect(MessagePartsMap([send, removal, edit]).parts == [part(one, "a")], "the later removal wins")
        let earlyRemoval = MessagePartsEdit.diff(from: sent, to: [part(one, "a")], at: at(4, 2))
        #expect(
            MessagePartsMap([send, edit, earlyRemoval]).parts == [part(one, "a"), part(two, "B")],
            "the later edit brings the part back")
    }

    @Test func aPartAddedByAnOlderWriteFollowsTheLatestOrder() {
        let send = MessagePartsEdit.send(sent, at: at(1))
        let added = MessagePartsEdit.diff(from: sent, to: sent + [part(three, "c")], at: at(5, 1))
        let reordered = MessagePartsEdit.diff(from: sent, to: [part(two, "b"), part(one, "a")], at: at(6, 2))
        #expect(reordered.set.isEmpty && reordered.removed.isEmpty)
        let merged = MessagePartsMap([send, reordered, added])
        #expect(merged.parts == [part(two, "b"), part(one, "a"), part(three, "c")])
        #expect(merged == MessagePartsMap([added, send, reordered]))
    }

    @Test func concurrentRemovalsOfEveryPartLeaveTheEmptiedPart() {
        let send = MessagePartsEdit.send(sent, at: at(1))
        let onA = MessagePartsEdit.diff(from: sent, to: [part(two, "b")], at: at(5, 1))
        let onB = MessagePartsEdit.diff(from: sent, to: [part(one, "a")], at: at(6, 2))
        let merged = MessagePartsMap([send, onA, onB])
        #expect(merged.parts == [MessagePartsMap.emptied])
        #expect(merged == MessagePartsMap([onB, onA, send]))
        // An edit from the emptied list sets its parts (the placeholder is no register).
        let next = MessagePartsEdit.diff(from: merged.parts, to: [part(three, "c")], at: at(7))
        #expect(next.set == [part(three, "c")] && next.removed.isEmpty)
        #expect(MessagePartsMap([send, onA, onB, next]).parts == [part(three, "c")])
    }

    @Test func anUnchangedListSetsNothing() {
        let edit = MessagePartsEdit.diff(from: sent, to: sent, at: at(5))
        #expect(edit.set.isEmpty && edit.removed.isEmpty && edit.order == [one, two])
    }

    @Test func theSendIsTheFirstWriteOfEveryPart() {
        let map = MessagePartsMap([.send(sent, at: at(1))])
        #expect(map.parts == sent)
        #expect(map.entries[one]?.at == at(1) && map.entries[two]?.at == at(1))
        #expect(map.orderAt == at(1) && map.orderIDs == [one, two])
    }
}
