import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import Testing

@testable import LaminaStore

/// Per-part edits in the store (`v27-part-readings`, SPEC §6.2), on both backends: the body
/// holds LaminaMerge's merged list, `message_part_readings` and `part_order` the registers, and
/// what is read back is the state the merge computes in memory, whatever order edits arrive in.
@Suite struct PartReadingsStorageTests {
    let alice: UserID = "alice"
    let bob: UserID = "bob"

    func part(_ id: UInt8, _ text: String) -> MessagePart {
        MessagePart(
            id: UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0xD0, id)), mimeType: .textPlain,
            content: .inline(Array(text.utf8)))
    }

    func registers(_ store: NodeStore, _ id: MessageID) async throws -> (MessagePartsMap, [MessagePart]) {
        try await store.read { r in
            guard let stored = try r.message(id) else { throw StorageError(.notFound, "no message \(id)") }
            return (try r.partsMap(of: stored), stored.message.parts)
        }
    }

    @Test(arguments: StoreBackend.allCases) func editsMergePerPartInAnyOrder(_ backend: StoreBackend) async throws {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let message = Message(
                id: .random(), conversationID: c.id, sender: alice, parts: [part(1, "one"), part(2, "two")],
                sentAt: Timestamp(millisecondsSince1970: 100), position: hlc(100))
            let send = MessagePartsEdit.send(message.parts, at: hlc(100))
            let onA = MessagePartsEdit.diff(from: message.parts, to: [part(1, "one, A"), part(2, "two")], at: hlc(300))
            let onB = MessagePartsEdit.diff(
                from: message.parts, to: [part(1, "one"), part(2, "two, B")], at: hlc(200, 0, nodeB))
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(message, hlc: hlc(100), origin: nodeA)
            }
            let first = try await store.write { tx in
                try tx.applyPartsEdit(of: message.id, onA, origin: nodeA, by: alice)
            }
            #expect(first?.after == [part(1, "one, A"), part(2, "two")])
            // The older edit of the other part arrives later and survives.
            let second = try await store.write { tx in
                try tx.applyPartsEdit(of: message.id, onB, origin: nodeB, by: alice)
            }
            #expect(second?.after == [part(1, "one, A"), part(2, "two, B")])
            #expect(second?.editedAt == hlc(300))
            let (map, body) = try await registers(store, message.id)
            #expect(map == MessagePartsMap([send, onB, onA]))
            #expect(body == map.parts)
            #expect(try await store.read { r in try r.editTimes(of: [message.id]) } == [message.id: hlc(300)])
            // A duplicate writes nothing.
            #expect(
                try await store.write { tx in try tx.applyPartsEdit(of: message.id, onB, origin: nodeB, by: alice) }
                    == nil)

            // A removal at a later reading beats an edit at an earlier one, whatever the order.
            let removal = MessagePartsEdit.diff(from: body, to: [part(1, "one, A")], at: hlc(400, 0, nodeB))
            let lateEdit = MessagePartsEdit.diff(
                from: body, to: [part(1, "one, A"), part(2, "two, again")], at: hlc(350))
            _ = try await store.write { tx in try tx.applyPartsEdit(of: message.id, removal, origin: nodeB, by: alice) }
            #expect(
                try await store.write { tx in try tx.applyPartsEdit(of: message.id, lateEdit, origin: nodeA, by: alice)
                }
                    == nil)
            let (afterRemoval, removedBody) = try await registers(store, message.id)
            #expect(removedBody == [part(1, "one, A")])
            #expect(afterRemoval == MessagePartsMap([send, onA, onB, lateEdit, removal]))

            // Concurrent removals of every part leave the emptied part, which is no register.
            let removeOne = MessagePartsEdit(at: hlc(500), set: [], removed: [part(1, "").id], order: [part(2, "").id])
            let emptied = try await store.write { tx in
                try tx.applyPartsEdit(of: message.id, removeOne, origin: nodeA, by: alice)
            }
            #expect(emptied?.after == [MessagePartsMap.emptied])
            let (final, finalBody) = try await registers(store, message.id)
            #expect(finalBody == [MessagePartsMap.emptied])
            #expect(final == MessagePartsMap([send, onA, onB, lateEdit, removal, removeOne]))
        }
    }

    /// A message edited before v27 (its row without `part_order`, no readings): its parts date
    /// from that edit, so an edit older than it loses.
    @Test(arguments: StoreBackend.allCases) func anEditFromBeforeV27DatesItsWholeList(_ backend: StoreBackend)
        async throws
    {
        try await withTemporaryStore(backend: backend) { store, _ in
            let c = try conversation(alice, [bob])
            let message = Message(
                id: .random(), conversationID: c.id, sender: alice, parts: [part(1, "one"), part(2, "two")],
                sentAt: Timestamp(millisecondsSince1970: 100), position: hlc(100))
            try await store.write { tx in
                _ = try tx.createConversation(c, hlc: hlc(1), origin: nodeA)
                try tx.appendMessage(message, hlc: hlc(100), origin: nodeA)
                // What the whole-list register left: the body and a row without an order.
                let whole = MessagePartsEdit.send([part(1, "one, old"), part(2, "two, old")], at: hlc(250))
                _ = try tx.applyPartsEdit(of: message.id, whole, origin: nodeA, by: alice)
                try tx.db.run("DELETE FROM message_part_readings", [])
                try tx.db.run("UPDATE message_part_updates SET part_order = NULL", [])
            }
            let (legacy, _) = try await registers(store, message.id)
            #expect(legacy.entries[part(1, "").id]?.at == hlc(250) && legacy.entries[part(2, "").id]?.at == hlc(250))
            let current = [part(1, "one, old"), part(2, "two, old")]
            let newer = MessagePartsEdit.diff(
                from: current, to: [part(1, "one, old"), part(2, "two, new")], at: hlc(260))
            let older = MessagePartsEdit.diff(
                from: current, to: [part(1, "one, older"), part(2, "two, old")], at: hlc(245, 0, nodeB))
            _ = try await store.write { tx in try tx.applyPartsEdit(of: message.id, newer, origin: nodeA, by: alice) }
            // Part 1 still dates from the old edit (250), so the edit at 245 loses.
            #expect(
                try await store.write { tx in try tx.applyPartsEdit(of: message.id, older, origin: nodeB, by: alice) }
                    == nil)
            let (map, body) = try await registers(store, message.id)
            #expect(body == [part(1, "one, old"), part(2, "two, new")])
            #expect(map.entries[part(1, "").id]?.at == hlc(250) && map.entries[part(2, "").id]?.at == hlc(260))
        }
    }
}
