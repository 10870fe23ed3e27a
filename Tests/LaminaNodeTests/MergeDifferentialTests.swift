import Foundation
import LaminaMerge
import LaminaModel
import LaminaStoreTestSupport
import LaminaWire
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// The differential merge test: random sequences of commands from several users go (a) to
/// LaminaMerge's full-state types (`MembershipLog`, `MetadataLWW`, `RecipientStatusLattice`
/// inside `UnreadCounts`, `DistinctRegistry`, `NotificationSetting`), the reference model, and (b) to a real node
/// through its command path (`NodeEngine` sessions over a temporary store on each backend,
/// frames in, ACK or ERROR out). After every step the node must agree with the model on each
/// command's outcome (accepted or refused, and which conversation a distinct create resolves
/// to), participants, distinctness, metadata, what each user's history holds with each
/// message's recipient statuses as the node reports them to that user, unread counts, and each
/// message's reactions (LaminaMerge's `ReactionSet`, SPEC §6.9), each user's notification
/// level of each conversation (SPEC §6.10), and each message's parts after edits by its sender
/// (UPDATE_MESSAGE_PARTS) and per-part edits replicated from another node at earlier or later
/// readings (REPLICATE kind 74), by LaminaMerge's `MessagePartsMap` (SPEC §6.2). The model
/// takes the node's HLC readings of local commands as inputs (the node's clock, not a decision).
///
/// Each case has its own seed and prints it on failure with its operations; run one case again
/// with `LAMINA_MERGE_SEED=<seed> swift test --filter MergeDifferentialTests`.
@Suite struct MergeDifferentialTests {
    /// Cases per backend. PostgreSQL runs the first 60 of SQLite's 300: each of its statements
    /// is a round trip, and all 300 would take the suite's time several times over.
    static func caseCount(_ backend: StoreBackend) -> Int { backend == .sqlite ? 300 : 60 }
    static let stepsPerCase = 24
    /// Cases run concurrently on one engine so that their commits share group commits.
    static let parallelCases = 16

    @Test(arguments: StoreBackend.allCases)
    func theNodeDecidesAsLaminaMerge(_ backend: StoreBackend) async throws {
        let seeds =
            DifferentialSeed.replay.map { [$0] } ?? (0..<Self.caseCount(backend)).map(DifferentialSeed.seed(case:))
        // Decisions, not durability, are under test: commits are not synced, so the cases
        // don't wait on fsync (and don't slow the disk for the rest of the suite).
        var storage = StorageConfiguration()
        storage.syncsCommits = false
        let harness = try EngineHarness(storage: storage, backend: backend)
        var failures: [String] = []
        await withTaskGroup(of: String?.self) { group in
            var pending = seeds.enumerated().makeIterator()
            for _ in 0..<Self.parallelCases {
                guard let (index, seed) = pending.next() else { break }
                group.addTask { await DifferentialCase(seed: seed, index: index, harness: harness).run() }
            }
            while let result = await group.next() {
                if let result { failures.append(result) }
                if let (index, seed) = pending.next() {
                    group.addTask { await DifferentialCase(seed: seed, index: index, harness: harness).run() }
                }
            }
        }
        await harness.close()
        #expect(
            failures.isEmpty, "\(failures.count) of \(seeds.count) cases disagree; the first:\n\(failures.first ?? "")")
    }
}

/// Case seeds: SplitMix64 streams from a fixed base, or the one case `LAMINA_MERGE_SEED` names.
enum DifferentialSeed {
    static let base: UInt64 = 0x6D65_7267_6564_6966

    /// The seed given in `LAMINA_MERGE_SEED` (decimal or 0x-hex): replay that case alone.
    static let replay: UInt64? = {
        guard let text = ProcessInfo.processInfo.environment["LAMINA_MERGE_SEED"] else { return nil }
        if text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
        return UInt64(text)
    }()

    static func seed(case index: Int) -> UInt64 {
        var mixer = DifferentialRandom(seed: base ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
        return mixer.next()
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014), as in the other randomized tests.
struct DifferentialRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
    mutating func subset<T: Hashable>(_ items: [T], min: Int = 0) -> Set<T> {
        var out = Set(items.filter { _ in chance(0.4) })
        while out.count < min { out.insert(pick(items)) }
        return out
    }
}

/// One conversation in the reference model.
struct ModelConversation {
    let id: ConversationID
    let creator: UserID
    let receipts: Bool
    /// Messages, deletions, receipts and membership: LaminaMerge's CRDTs.
    var state: UnreadCounts
    var metadata: MetadataLWW
    /// Messages in the order sent, with the model's and the node's positions.
    var messages: [MessageStamp] = []
    var nodePositions: [MessageID: MessagePosition] = [:]
    /// Each message's reactions (a message deleted for everyone has none).
    var reactions: [MessageID: ReactionSet] = [:]
    /// Each user's notification level of the conversation (SPEC §6.10): `NotificationSetting`.
    var levels: [UserID: NotificationSetting] = [:]
    /// Each message's parts (SPEC §6.2): `MessagePartsMap`, deleted messages included.
    var parts: [MessageID: MessagePartsMap] = [:]

    var participants: Set<UserID> { state.membership.participants }
    func isMember(_ user: UserID) -> Bool { state.membership.isParticipant(user) }
    func isDeleted(_ id: MessageID) -> Bool { state.deletedForAll.contains(id) }

    /// The conversation as the distinct-create rule sees it now.
    var value: Conversation {
        Conversation(
            id: id, participants: participants, isDistinct: state.membership.isDistinct, metadata: metadata.metadata,
            deliveryReceiptsEnabled: receipts, createdAt: Timestamp(millisecondsSince1970: 0), creator: creator)
    }
}

/// What the node holds for one conversation, read in one transaction.
struct NodeConversationView: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var id: MessageID
        var statuses: [UserID: RecipientStatus]
    }
    var participants: Set<UserID>
    var isDistinct: Bool
    var metadata: [String: String]
    var history: [UserID: [Entry]]
    var unread: [UserID: Int]
    /// The reactions present, as "message user key".
    var reactions: Set<String>
    /// Each user's level and its end as the node holds them (nil: never set).
    var levels: [UserID: Level]
    /// Each message's parts as the node stores them.
    var parts: [MessageID: [MessagePart]]

    struct Level: Sendable, Equatable {
        var level: NotificationLevel
        var until: UInt64?
    }
}

final class DifferentialCase: @unchecked Sendable {
    let seed: UInt64
    let harness: EngineHarness
    let users: [UserID]
    var random: DifferentialRandom
    var clients: [UserID: Client] = [:]
    var conversations: [ModelConversation] = []
    var registry = DistinctRegistry()
    var log: [String] = []
    var clock: UInt64 = 0
    /// The node this case's replicated edits come from, and its last counter.
    let remote: NodeID
    var remoteCounter: UInt64 = 0

    static let paths = ["a", "a.b", "a.c", "a.b.d", "b"].map { try! MetadataKeyPath(parsing: $0) }

    init(seed: UInt64, index: Int, harness: EngineHarness) {
        self.seed = seed
        self.harness = harness
        random = DifferentialRandom(seed: seed)
        remote = NodeID(0x10_0000 + UInt64(index))
        // Users of their own per case, so distinct resolution sees only this case's conversations.
        users = (1...4).map { try! UserID("d\(String(seed, radix: 16))-u\($0)") }
    }

    /// The model's clock: one tick per command, in the order the node assigns its HLC readings.
    func tick() -> HLCTimestamp {
        clock += 1
        return HLCTimestamp(physical: 1_000 + clock, logical: 0, node: NodeID(7))
    }

    /// Runs the case; returns a report when the node disagrees with the model.
    func run() async -> String? {
        do {
            for user in users { clients[user] = try await harness.connect(user, sync: false) }
            for step in 0..<MergeDifferentialTests.stepsPerCase {
                if let disagreement = try await self.step() { return report("step \(step): \(disagreement)") }
            }
            return nil
        } catch {
            return report("error: \(error)")
        }
    }

    func report(_ what: String) -> String {
        """
        seed 0x\(String(seed, radix: 16)) (replay: LAMINA_MERGE_SEED=0x\(String(seed, radix: 16)) swift test --filter MergeDifferentialTests)
        \(what)
        operations:
        \(log.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
        """
    }

    /// The outcome the model expects of a command.
    enum Expected: Equatable {
        case accepted
        case acceptedAs(ConversationID)
        case refused
    }

    // MARK: one step

    func step() async throws -> String? {
        let roll = Double.random(in: 0..<1, using: &random)
        if conversations.isEmpty || roll < 0.12 { return try await create() }
        let index = Int.random(in: 0..<conversations.count, using: &random)
        let c = conversations[index]
        // Mostly current participants act; sometimes anyone (refused unless a participant).
        let actor =
            random.chance(0.85) && !c.participants.isEmpty ? random.pick(c.participants.sorted()) : random.pick(users)
        let sendable = c.messages.filter { !c.isDeleted($0.id) }
        if !c.messages.isEmpty, random.chance(0.2) {
            return try await react(index, actor: actor, message: random.pick(c.messages))
        }
        if !c.messages.isEmpty, random.chance(0.15) {
            let message = random.pick(c.messages)
            if random.chance(0.4) { return try await remoteEdit(index, message: message) }
            return try await edit(index, actor: random.chance(0.8) ? message.sender : actor, message: message)
        }
        switch roll {
        case ..<0.22: return try await changeParticipants(index, actor: actor, add: true)
        case ..<0.30: return try await changeParticipants(index, actor: actor, add: false)
        case ..<0.42: return try await setMetadata(index, actor: actor)
        case ..<0.61: return try await send(index, actor: actor)
        case ..<0.65: return try await setLevel(index, actor: actor)
        case ..<0.75 where !c.messages.isEmpty:
            return try await markRead(index, actor: actor, message: random.pick(c.messages))
        case ..<0.83 where !c.messages.isEmpty:
            return try await upTo(index, actor: actor, message: random.pick(c.messages), read: true)
        case ..<0.93 where !c.messages.isEmpty:
            return try await upTo(index, actor: actor, message: random.pick(c.messages), read: false)
        case ..<1 where !sendable.isEmpty:
            return try await deleteMessage(index, actor: actor, message: random.pick(sendable))
        default: return try await send(index, actor: actor)
        }
    }

    func create() async throws -> String? {
        let creator = random.pick(users)
        let others = random.subset(users.filter { $0 != creator }, min: 1)
        var metadata = Metadata()
        if random.chance(0.3) { metadata.set(.string(random.pick(["x", "y"])), at: Self.paths[0]) }
        // The model (`receiptsEnabled`) knows the single flag: both receipt switches alike.
        let distinct = random.chance(0.7)
        let receipts = random.chance(0.75)
        let options = ConversationOptions(
            isDistinct: distinct, metadata: metadata, deliveryReceiptsEnabled: receipts, readReceiptsEnabled: receipts)
        let id = ConversationID(uuid: UUID(uuid: uuidBytes()))
        let requested = try Conversation(id: id, creator: creator, participants: others, options: options)
        log.append(
            "\(creator) creates \(id) with \(others.sorted()) distinct=\(options.isDistinct) receipts=\(options.deliveryReceiptsEnabled) metadata=\(metadata.leaves.map { "\($0.0)=\($0.1)" })"
        )
        let frame = Frame.createConversation(
            CreateConversation(conversationID: id, participants: others, options: options))

        var expected = Expected.acceptedAs(id)
        if options.isDistinct, let existingID = registry.existing(for: requested.participants),
            let existing = conversations.first(where: { $0.id == existingID })
        {
            switch DistinctResolution.resolveCreate(requested, existing: existing.value) {
            case .created: break
            case .matches(let c): expected = .acceptedAs(c.id)
            case .conflicts: expected = .refused
            }
        }
        if expected == .acceptedAs(id) {
            let t = tick()
            var state = UnreadCounts(conversation: id)
            state.apply(.membership(.genesis(MembershipGenesis(requested, at: t))))
            conversations.append(
                ModelConversation(
                    id: id, creator: creator, receipts: options.deliveryReceiptsEnabled,
                    state: state, metadata: MetadataLWW(metadata, at: t)))
            if options.isDistinct { registry.apply(.created(DistinctCandidate(requested, createdAt: t))) }
        }
        return try await expect(frame, by: creator, expected)
    }

    func changeParticipants(_ index: Int, actor: UserID, add: Bool) async throws -> String? {
        var c = conversations[index]
        let targets = random.subset(users, min: 1)
        log.append("\(actor) \(add ? "adds" : "removes") \(targets.sorted()) in \(c.id)")
        let update = ParticipantsUpdate(requestID: UUID(), conversationID: c.id, users: targets)
        var expected = Expected.refused
        let t = tick()
        do {
            // Checked as LaminaMerge's commands do; the node logs an operation for every user
            // named (also one that changes nothing), and any operation ends distinctness.
            _ =
                add
                ? try c.state.membership.addOperations(
                    targets, by: actor, at: t, limit: Conversation.participantLimit(readReceiptsEnabled: c.receipts)
                )
                : try c.state.membership.removeOperations(targets, by: actor, at: t)
            let ops = targets.sorted().map { MembershipOperation(add ? .add : .remove, user: $0, actor: actor, at: t) }
            let wasDistinct = c.state.membership.isDistinct
            for op in ops { c.state.apply(.membership(.change(op))) }
            if wasDistinct, !ops.isEmpty { registry.apply(.becameNonDistinct(c.id, at: t)) }
            conversations[index] = c
            expected = .accepted
        } catch {}
        return try await expect(add ? .addParticipants(update) : .removeParticipants(update), by: actor, expected)
    }

    func setMetadata(_ index: Int, actor: UserID) async throws -> String? {
        var c = conversations[index]
        let path = random.pick(Self.paths)
        let frame: Frame
        let t = tick()
        var ops: [MetadataOperation] = []
        var refused = !c.isMember(actor)
        if random.chance(0.3) {
            log.append("\(actor) deletes metadata \(path) in \(c.id)")
            frame = .deleteMetadata(DeleteMetadata(requestID: UUID(), conversationID: c.id, keyPath: path))
            ops = [c.metadata.operation(deleting: path, timestamp: t)]
        } else {
            let value: MetadataValue =
                random.chance(0.25)
                ? .dictionary(["x": .string(random.pick(["1", "2"])), "y": .string("3")])
                : .string(random.pick(["red", "blue", "green"]))
            log.append("\(actor) sets metadata \(path) = \(value) in \(c.id)")
            frame = .setMetadata(SetMetadata(requestID: UUID(), conversationID: c.id, keyPath: path, value: value))
            do { ops = try c.metadata.operations(setting: value, at: path, timestamp: t) } catch { refused = true }
        }
        if !refused {
            for op in ops { c.metadata.apply(op) }
            conversations[index] = c
        }
        return try await expect(frame, by: actor, refused ? .refused : .accepted)
    }

    func send(_ index: Int, actor: UserID) async throws -> String? {
        var c = conversations[index]
        let id = MessageID(uuid: UUID(uuid: uuidBytes()))
        log.append("\(actor) sends \(id) in \(c.id)")
        let sent = [MessagePart(id: UUID(uuid: uuidBytes()), mimeType: .textPlain, content: .inline(Array("m".utf8)))]
        let frame = Frame.sendMessage(SendMessage(messageID: id, conversationID: c.id, parts: sent))
        guard c.isMember(actor) else { return try await expect(frame, by: actor, .refused) }
        let stamp = MessageStamp(id: id, conversation: c.id, sender: actor, position: tick())
        c.state.apply(.created(stamp))
        c.messages.append(stamp)
        let (reply, _) = try await clients[actor]!.command(frame)
        guard let position = reply.ack?.position else { return "node refused \(log.last!): \(reply)" }
        c.nodePositions[id] = position
        // The send is the first write of its parts, at the node's reading of the message.
        let reading = try await harness.store.read { r in try r.message(id)?.hlc }
        c.parts[id] = MessagePartsMap([.send(sent, at: try #require(reading))])
        conversations[index] = c
        return try await compare()
    }

    func setLevel(_ index: Int, actor: UserID) async throws -> String? {
        var c = conversations[index]
        let level = random.pick(NotificationLevel.allCases)
        let until: Timestamp? =
            random.chance(0.4) ? Timestamp(millisecondsSince1970: Int64(random.pick([0, 5_000]))) : nil
        log.append("\(actor) sets notification level \(level) until \(until.map { "\($0)" } ?? "-") in \(c.id)")
        let frame = Frame.setNotificationLevel(
            SetNotificationLevel(requestID: UUID(), conversationID: c.id, level: level, until: until))
        guard c.isMember(actor) else { return try await expect(frame, by: actor, .refused) }
        c.levels[actor, default: NotificationSetting()].apply(
            NotificationSetting.Write(
                level: level, until: until.map { UInt64(clamping: $0.millisecondsSince1970) }, at: tick()))
        conversations[index] = c
        return try await expect(frame, by: actor, .accepted)
    }

    func markRead(_ index: Int, actor: UserID, message: MessageStamp) async throws -> String? {
        var c = conversations[index]
        log.append("\(actor) marks \(message.id) read in \(c.id)")
        let frame = Frame.markRead(MarkRead(requestID: UUID(), conversationID: c.id, messageID: message.id))
        guard c.isMember(actor), !c.isDeleted(message.id) else { return try await expect(frame, by: actor, .refused) }
        _ = tick()
        if message.sender != actor { c.state.apply(.receipt(RecipientStatusLattice.markRead(message.id, by: actor))) }
        conversations[index] = c
        return try await expect(frame, by: actor, .accepted)
    }

    /// MARK_ALL_READ (`read`) or DELIVERY_RECEIPT up to `message`'s position.
    func upTo(_ index: Int, actor: UserID, message: MessageStamp, read: Bool) async throws -> String? {
        var c = conversations[index]
        log.append("\(actor) \(read ? "marks all read" : "acknowledges delivery") up to \(message.id) in \(c.id)")
        let position = c.nodePositions[message.id]!
        let frame: Frame =
            read
            ? .markAllRead(MarkAllRead(requestID: UUID(), conversationID: c.id, upTo: position))
            : .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: c.id, upTo: position))
        guard c.isMember(actor) else { return try await expect(frame, by: actor, .refused) }
        _ = tick()
        let key = ConversationUserKey(conversation: c.id, user: actor)
        if read {
            c.state.apply(.receipt(.readUpTo(key, message.position!)))
        } else if c.receipts {
            c.state.apply(.receipt(.deliveredUpTo(key, message.position!)))
        }
        conversations[index] = c
        return try await expect(frame, by: actor, .accepted)
    }

    func deleteMessage(_ index: Int, actor: UserID, message: MessageStamp) async throws -> String? {
        var c = conversations[index]
        log.append("\(actor) deletes \(message.id) for everyone in \(c.id)")
        let frame = Frame.deleteMessage(
            DeleteMessage(requestID: UUID(), conversationID: c.id, messageID: message.id, mode: .allParticipants))
        guard c.isMember(actor) else { return try await expect(frame, by: actor, .refused) }
        _ = tick()
        c.state.apply(.deleted(message.id, forUser: nil))
        c.reactions[message.id] = nil
        conversations[index] = c
        return try await expect(frame, by: actor, .accepted)
    }

    /// REACT, add or remove, with one of a few keys: the model applies `ReactionSet`'s rule as
    /// one node does (an add stamps a tag unless the reaction is present, a remove takes away
    /// every live tag).
    func react(_ index: Int, actor: UserID, message: MessageStamp) async throws -> String? {
        var c = conversations[index]
        let key = random.pick(["+1", "\u{1F389}", "ok"])
        let add = random.chance(0.6)
        log.append("\(actor) \(add ? "adds" : "removes") reaction \(key) on \(message.id) in \(c.id)")
        let frame = Frame.react(
            React(requestID: UUID(), conversationID: c.id, messageID: message.id, key: key, op: add ? .add : .remove))
        guard c.isMember(actor), !c.isDeleted(message.id) else { return try await expect(frame, by: actor, .refused) }
        let reaction = Reaction(user: actor, key: key)
        var set = c.reactions[message.id] ?? ReactionSet()
        if add {
            if !set.contains(reaction) { set.apply(.added(reaction, tag: tick())) }
        } else {
            set.apply(.removed(reaction, observed: set.liveTags(of: reaction)))
        }
        c.reactions[message.id] = set
        conversations[index] = c
        return try await expect(frame, by: actor, .accepted)
    }

    /// A list of parts changed at random from `parts`: a part's text replaced, a part added, one
    /// removed, or the order reversed (ids from the case's random stream).
    func changed(_ parts: [MessagePart]) -> [MessagePart] {
        var out = parts
        let text = Array(random.pick(["x", "y", "z", "w"]).utf8)
        switch Int.random(in: 0..<4, using: &random) {
        case 0 where !out.isEmpty:
            let i = Int.random(in: 0..<out.count, using: &random)
            out[i].content = .inline(text)
        case 1 where out.count > 1:
            out.remove(at: Int.random(in: 0..<out.count, using: &random))
        case 2 where out.count > 1:
            out.reverse()
        default:
            out.append(MessagePart(id: UUID(uuid: uuidBytes()), mimeType: .textPlain, content: .inline(text)))
        }
        return out
    }

    /// UPDATE_MESSAGE_PARTS by `actor`: accepted from the sender while a participant, of a
    /// message not deleted for everyone; the model applies the per-part edit at the node's reading.
    func edit(_ index: Int, actor: UserID, message: MessageStamp) async throws -> String? {
        var c = conversations[index]
        guard let current = c.parts[message.id] else { return "no model parts for \(message.id)" }
        let parts = changed(current.parts)
        log.append("\(actor) edits \(message.id) in \(c.id) to \(parts.map(Self.describe))")
        let frame = Frame.updateMessageParts(
            UpdateMessageParts(requestID: UUID(), conversationID: c.id, messageID: message.id, parts: parts))
        guard c.isMember(actor), actor == message.sender, !c.isDeleted(message.id) else {
            return try await expect(frame, by: actor, .refused)
        }
        let (reply, _) = try await clients[actor]!.command(frame)
        guard case .ack = reply else { return "node refused \(log.last!): \(reply)" }
        let reading = try await harness.store.read { r in
            try r.message(message.id).map { try r.partsMap(of: $0).orderAt }
        }
        guard let at = reading ?? nil else { return "the node holds no reading for \(message.id)" }
        c.parts[message.id, default: MessagePartsMap()].apply(.diff(from: current.parts, to: parts, at: at))
        conversations[index] = c
        return try await compare()
    }

    /// A per-part edit replicated from another node (REPLICATE kind 74), at a reading a little
    /// before or after the message's latest: applied to deleted messages too.
    func remoteEdit(_ index: Int, message: MessageStamp) async throws -> String? {
        var c = conversations[index]
        guard let current = c.parts[message.id], let latest = current.orderAt else {
            return "no model parts for \(message.id)"
        }
        let parts = changed(current.parts)
        let offset = Int64.random(in: -40...40, using: &random)
        let at = HLCTimestamp(
            physical: UInt64(Int64(latest.physical) + offset), logical: UInt32.random(in: 0...1, using: &random),
            node: remote)
        let edit = MessagePartsEdit.diff(from: current.parts, to: parts, at: at)
        let edited = MessagePartsEdited(
            conversationID: c.id, messageID: message.id, parts: parts, set: Set(edit.set.map(\.id)),
            removed: Set(edit.removed), by: message.sender, at: at)
        log.append("node \(remote) edits \(message.id) at \(at) to \(parts.map(Self.describe))")
        remoteCounter += 1
        _ = try await harness.engine.applyReplicated([
            ReplicatedOperation(origin: remote, counter: remoteCounter, hlc: at, payload: .partsEdited(edited))
        ])
        c.parts[message.id, default: MessagePartsMap()].apply(edit)
        conversations[index] = c
        return try await compare()
    }

    static func describe(_ part: MessagePart) -> String {
        guard case .inline(let bytes) = part.content else { return "\(part.id)" }
        return "\(part.id.uuidString.prefix(4)):\(String(decoding: bytes, as: UTF8.self))"
    }

    // MARK: comparing

    /// Sends `frame` as `user`, checks the outcome against `expected`, then compares state.
    func expect(_ frame: Frame, by user: UserID, _ expected: Expected) async throws -> String? {
        let (reply, _) = try await clients[user]!.command(frame)
        switch (expected, reply) {
        case (.accepted, .ack), (.refused, .error): break
        case (.acceptedAs(let id), .ack(let ack)) where ack.conversationID == id: break
        default: return "the model expects \(expected), the node answered \(reply)"
        }
        return try await compare()
    }

    /// Compares every conversation of the case with the node.
    func compare() async throws -> String? {
        let ids = conversations.map { ($0.id, $0.messages.map(\.id)) }
        let users = self.users
        let views = try await harness.store.read { r in
            try ids.map { id, messages in try Self.view(of: id, users: users, messages: messages, r) }
        }
        for (c, node) in zip(conversations, views) {
            if let difference = difference(c, node) { return "\(c.id): \(difference)" }
        }
        return nil
    }

    static func view(of id: ConversationID, users: [UserID], messages: [MessageID], _ r: StorageReader) throws
        -> NodeConversationView
    {
        var history: [UserID: [NodeConversationView.Entry]] = [:]
        var unread: [UserID: Int] = [:]
        var levels: [UserID: NodeConversationView.Level] = [:]
        for user in users {
            if let write = try r.notificationSetting(of: user, in: id).current {
                levels[user] = NodeConversationView.Level(level: write.level, until: write.until)
            }
            let messages = (try? r.history(of: id, for: user, .complete(after: nil, limit: 10_000))) ?? []
            history[user] = messages.map { NodeConversationView.Entry(id: $0.id, statuses: $0.recipientStatus) }
            unread[user] = try r.unreadCount(of: id, for: user)
        }
        return NodeConversationView(
            participants: try r.participants(of: id),
            isDistinct: try r.conversation(id)?.conversation.isDistinct ?? false,
            metadata: Dictionary(uniqueKeysWithValues: try r.metadata(of: id).leaves.map { ($0.0.description, $0.1) }),
            history: history, unread: unread,
            reactions: Set(try r.presentReactions(on: messages).map { "\($0.message) \($0.user) \($0.key)" }),
            levels: levels,
            parts: try messages.reduce(into: [:]) { out, m in out[m] = try r.message(m)?.message.parts }
        )
    }

    func difference(_ c: ModelConversation, _ node: NodeConversationView) -> String? {
        if node.participants != c.participants {
            return "participants: node \(node.participants.sorted()), model \(c.participants.sorted())"
        }
        if node.isDistinct != c.state.membership.isDistinct {
            return "distinct: node \(node.isDistinct), model \(c.state.membership.isDistinct)"
        }
        let metadata = Dictionary(uniqueKeysWithValues: c.metadata.metadata.leaves.map { ($0.0.description, $0.1) })
        if node.metadata != metadata { return "metadata: node \(node.metadata), model \(metadata)" }
        let reactions = Set(
            c.reactions.flatMap { message, set in set.present.map { "\(message) \($0.user) \($0.key)" } })
        if node.reactions != reactions {
            return "reactions: node \(node.reactions.sorted()), model \(reactions.sorted())"
        }
        let levels = c.levels.compactMapValues { s in
            s.current.map { NodeConversationView.Level(level: $0.level, until: $0.until) }
        }
        if node.levels != levels { return "notification levels: node \(node.levels), model \(levels)" }
        for (message, model) in c.parts where node.parts[message] != model.parts {
            return
                "parts of \(message): node \((node.parts[message] ?? []).map(Self.describe)), model \(model.parts.map(Self.describe))"
        }
        for user in users {
            let visible = c.messages.filter { m in
                !c.isDeleted(m.id) && c.state.membership.canSee(user, messageAt: m.position!)
            }
            let entries = node.history[user] ?? []
            if entries.map(\.id) != visible.map(\.id) {
                return "history of \(user): node \(entries.map(\.id)), model \(visible.map(\.id))"
            }
            for (entry, stamp) in zip(entries, visible) {
                // Every status the node reports, and at least the sender's.
                for other in Set(entry.statuses.keys).union([stamp.sender]) {
                    let expected = RecipientStatusLattice.reported(
                        c.state.receipts.status(of: stamp, for: other), of: other, viewer: user,
                        receiptsEnabled: c.receipts)
                    let reported = entry.statuses[other]
                    if reported != expected {
                        return
                            "status of \(other) for \(stamp.id) as \(user) sees it: node \(reported.map { "\($0)" } ?? "none"), model \(expected)"
                    }
                }
            }
            let unread = c.state.unreadCount(for: user)
            if node.unread[user] != unread {
                return "unread count of \(user): node \(node.unread[user] ?? -1), model \(unread)"
            }
        }
        return nil
    }

    /// Identifiers from the case's random stream, so a replay uses the same ones.
    func uuidBytes() -> uuid_t {
        let a = random.next()
        let b = random.next()
        var bytes = withUnsafeBytes(of: a) { Array($0) } + withUnsafeBytes(of: b) { Array($0) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
        )
    }
}
