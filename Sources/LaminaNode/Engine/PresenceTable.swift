import LaminaMerge
import LaminaModel

/// The presence this node holds, in memory only (SPEC §6.6): per user their sessions here by
/// device, their ``PresenceBoard`` (this node's report), when they were last seen, and whom
/// they follow while online; and per user the online users following them, so a change
/// reaches its followers by one lookup. Pure: the engine passes clock readings in and sends
/// what the returned ``PresenceTransition`` says.
struct PresenceTable: Sendable {
    struct Entry: Sendable {
        /// Open authenticated sessions here, by device.
        var sessions: [String: Int] = [:]
        var board = PresenceBoard()
        /// When the user was last connected and visible (set as they go offline or invisible).
        var lastSeenAt: Timestamp?
        /// Whom the user follows (registered in ``PresenceTable/followers`` while online here).
        var followees: Set<UserID> = []
    }

    private(set) var entries: [UserID: Entry] = [:]
    /// Per followed user, the users online here who follow them.
    private(set) var followers: [UserID: Set<UserID>] = [:]
    /// Per other node whose reports this one holds, the peer whose link they came by (the node
    /// itself while linked directly): see PresenceRoutes.swift.
    var routes: [NodeID: NodeID] = [:]
    /// The peers with a presence link up, and how many (a pair may briefly hold two sessions).
    var links: [NodeID: Int] = [:]
    let node: NodeID

    init(node: NodeID) { self.node = node }

    /// The users with a session open here.
    var onlineCount: Int { entries.values.count { !$0.sessions.isEmpty } }
    /// Follow edges registered (one per online follower and followee).
    var followEdgeCount: Int { followers.values.reduce(0) { $0 + $1.count } }

    /// A session of `user` on `device` authenticated here.
    mutating func connect(_ user: UserID, device: String, at hlc: HLCTimestamp, now: Timestamp) -> PresenceTransition {
        let node = node
        return transition(user, now: now) { e in
            e.sessions[device, default: 0] += 1
            Self.report(&e, node: node, at: hlc, choice: e.board.choice)
        }
    }

    /// A session of `user` on `device` ended here.
    mutating func disconnect(_ user: UserID, device: String, at hlc: HLCTimestamp, now: Timestamp)
        -> PresenceTransition
    {
        let node = node
        let moved = transition(user, now: now) { e in
            guard let count = e.sessions[device] else { return }
            e.sessions[device] = count > 1 ? count - 1 : nil
            Self.report(&e, node: node, at: hlc, choice: e.board.choice)
        }
        if entries[user]?.sessions.isEmpty == true { unfollowAll(user) }
        return moved
    }

    /// `user` chose `status` on one of their devices here (never `offline`).
    mutating func choose(_ status: PresenceStatus, of user: UserID, at hlc: HLCTimestamp, now: Timestamp)
        -> PresenceTransition
    {
        let node = node
        return transition(user, now: now) { e in
            Self.report(&e, node: node, at: hlc, choice: PresenceChoice(status: status, at: hlc))
        }
    }

    /// Another node's report of `user` (a peer's PEER_PRESENCE, or a node sharing the store).
    mutating func apply(_ report: PresenceReport, of user: UserID, now: Timestamp) -> PresenceTransition {
        transition(user, now: now) { $0.board.apply(report) }
    }

    /// Whether `report` is newer than the one held of its node for `user` (so applying it
    /// changes what this node holds, and a relay passes it on).
    func isNewer(_ report: PresenceReport, of user: UserID) -> Bool {
        var board = entries[user]?.board ?? PresenceBoard()
        let before = board.reports[report.node]
        board.apply(report)
        return board.reports[report.node] != before
    }

    /// Every report this node holds of `origin`.
    func reports(of origin: NodeID) -> [(user: UserID, report: PresenceReport)] {
        entries.compactMap { user, e in e.board.reports[origin].map { (user, $0) } }
    }

    /// Forgets every report of `node` (its link was lost, or it stopped reporting); returns
    /// what moved for the users it had reported.
    mutating func forget(_ node: NodeID, now: Timestamp) -> [PresenceTransition] {
        let users = entries.compactMap { $0.value.board.reports[node] == nil ? nil : $0.key }
        return users.map { user in transition(user, now: now) { $0.board.forget(node) } }
    }

    /// This node's latest report of every user it has one of, for a peer that just connected.
    var localReports: [(user: UserID, report: PresenceReport)] {
        entries.compactMap { user, e in e.board.reports[node].map { (user, $0) } }
    }

    /// This node's report of `user`.
    func localReport(of user: UserID) -> PresenceReport? { entries[user]?.board.reports[node] }

    /// Makes this node's report of the entry: its open devices and the latest choice known.
    private static func report(_ e: inout Entry, node: NodeID, at hlc: HLCTimestamp, choice: PresenceChoice?) {
        e.board.apply(PresenceReport(node: node, devices: e.sessions.count, choice: choice, at: hlc))
    }

    /// Registers that `follower` (online here) follows `users`; returns those not followed before.
    mutating func follow(_ follower: UserID, _ users: some Sequence<UserID>) -> [UserID] {
        guard entries[follower]?.sessions.isEmpty == false else { return [] }
        var added: [UserID] = []
        for user in users where user != follower {
            guard entries[follower]!.followees.insert(user).inserted else { continue }
            followers[user, default: []].insert(follower)
            added.append(user)
        }
        return added
    }

    /// `follower` no longer follows `user`.
    mutating func unfollow(_ follower: UserID, _ user: UserID) {
        guard entries[follower]?.followees.remove(user) != nil else { return }
        followers[user]?.remove(follower)
        if followers[user]?.isEmpty == true { followers[user] = nil }
    }

    private mutating func unfollowAll(_ follower: UserID) {
        guard let followees = entries[follower]?.followees else { return }
        for user in followees {
            followers[user]?.remove(follower)
            if followers[user]?.isEmpty == true { followers[user] = nil }
        }
        entries[follower]?.followees = []
    }

    /// What `viewer` sees of `user` (the user themself sees `invisible`; nil: anyone else);
    /// nil when this node has never seen the user.
    func presence(of user: UserID, as viewer: UserID?) -> Presence? {
        guard let e = entries[user] else { return nil }
        let status = viewer == user ? e.board.ownStatus : e.board.visibleStatus
        return Presence(status: status, lastSeenAt: status == .offline || status == .invisible ? e.lastSeenAt : nil)
    }

    /// The users `user` follows.
    func followees(of user: UserID) -> Set<UserID> { entries[user]?.followees ?? [] }

    /// Applies `change` to `user`'s entry and says what moved (and whether this node's report
    /// changed what other nodes need: its having devices, or its choice).
    private mutating func transition(_ user: UserID, now: Timestamp, _ change: (inout Entry) -> Void)
        -> PresenceTransition
    {
        var e = entries[user] ?? Entry()
        let before = (own: e.board.ownStatus, visible: e.board.visibleStatus)
        let reported = e.board.reports[node]
        change(&e)
        // A user who goes offline or invisible was last seen now.
        let lastSeen = before.visible != .offline && e.board.visibleStatus == .offline ? now : nil
        if let lastSeen { e.lastSeenAt = lastSeen }
        let report = e.board.reports[node]
        entries[user] = e
        return PresenceTransition(
            user: user, ownChanged: before.own != e.board.ownStatus,
            visibleChanged: before.visible != e.board.visibleStatus,
            reportChanged: report != nil
                && ((reported?.devices ?? 0 > 0) != (report!.devices > 0) || reported?.choice != report!.choice),
            lastSeenAt: lastSeen)
    }

    /// Times the store kept of when users were last seen (SPEC §6.6, kept across restarts), for
    /// users this node has no time of since it started: they show `offline` with that time.
    mutating func remember(lastSeen: [UserID: Timestamp]) {
        for (user, time) in lastSeen where entries[user]?.lastSeenAt == nil {
            entries[user, default: Entry()].lastSeenAt = time
        }
    }
}

/// What one change of a user's presence moved: their own view (their devices are told) and
/// what others see (their online followers are told).
struct PresenceTransition: Sendable, Equatable {
    var user: UserID
    var ownChanged: Bool
    var visibleChanged: Bool
    /// This node's report moved in a way other nodes must learn (it has devices of the user
    /// or not any more, or carries a newer choice).
    var reportChanged = false
    /// Set when what others see became `offline` (the user was last seen then).
    var lastSeenAt: Timestamp? = nil
}
