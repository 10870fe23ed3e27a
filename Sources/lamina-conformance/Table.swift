import Foundation
import LaminaMerge
import LaminaModel
import LaminaWire

/// The session-state table of SPEC §5.7, as probes: every frame type a client can send (and
/// the node's and peers' types, which a client must not send), in every state.
enum Table {
    static let unexpected = Outcome.error("unexpected-frame", fatal: true)
    static let forbidden = Outcome.error("forbidden", fatal: true)
    static let authenticationRequired = Outcome.error("authentication-required", fatal: false)

    /// Frames only a node or a peer sends, with the outcome a client session gives them in
    /// every state after HELLO.
    static let foreign: [(String, @Sendable (ProbeContext) -> Frame, Outcome)] = [
        (
            "WELCOME",
            { _ in
                .welcome(
                    Welcome(
                        version: 1, features: [], nodeID: NodeID(1), serverTime: Timestamp(millisecondsSince1970: 0),
                        maxFrameSize: 16384))
            }, unexpected
        ),
        (
            "NONCE",
            { _ in .nonce(Nonce(requestID: UUID(), nonce: "n", expiresAt: Timestamp(millisecondsSince1970: 0))) },
            unexpected
        ),
        (
            "AUTHENTICATED",
            { _ in
                .authenticated(
                    Authenticated(
                        requestID: UUID(), sessionToken: "t", identity: Identity(userID: "x"),
                        expiresAt: Timestamp(millisecondsSince1970: 0)))
            }, unexpected
        ),
        ("ACK", { _ in .ack(Ack(requestID: UUID())) }, unexpected),
        (
            "CHANGE",
            { c in
                .change(
                    Change(
                        seq: 1,
                        event: .typing(TypingChanged(conversationID: c.conversation, user: "x", state: .started))))
            }, unexpected
        ),
        (
            "CHANGE_BATCH",
            { c in
                .changeBatch(
                    ChangeBatch(changes: [
                        Change(
                            seq: 1,
                            event: .typing(TypingChanged(conversationID: c.conversation, user: "x", state: .started)))
                    ]))
            }, unexpected
        ),
        ("PEER_HELLO", { _ in .peerHello(PeerHello(nodeID: NodeID(9), cluster: "c")) }, forbidden),
        ("VERSION_VECTOR", { _ in .versionVector(VersionVector()) }, forbidden),
        (
            "REPLICATE",
            { c in
                .replicate(
                    Replicate(operations: [
                        ReplicatedOperation(
                            origin: NodeID(9), counter: 1, hlc: c.position,
                            event: .typing(TypingChanged(conversationID: c.conversation, user: "x", state: .started)))
                    ]))
            }, forbidden
        ),
        ("PEER_ACK", { _ in .peerAck(PeerAck(vector: VersionVector())) }, forbidden),
        (
            "PEER_PRESENCE",
            { c in
                .peerPresence(
                    PeerPresence(entries: [.init(user: "x", devices: 1, choice: nil, at: c.position)]))
            }, forbidden
        ),
        (
            "PEER_PRESENCE_RELAYED",
            { c in
                .peerPresenceRelayed(
                    PeerPresenceRelayed(
                        origin: NodeID(9), entries: [.init(user: "x", devices: 1, choice: nil, at: c.position)]))
            }, forbidden
        ),
        (
            "PEER_PRESENCE_WITHDRAWN", { _ in .peerPresenceWithdrawn(PeerPresenceWithdrawn(origins: [NodeID(9)])) },
            forbidden
        ),
    ]

    /// The commands of §6 (each with a fresh id), in an order where each still applies
    /// after the ones before it on one stream (the deletion comes last).
    static let commands: [(String, @Sendable (ProbeContext) -> Frame)] = [
        (
            "CREATE_CONVERSATION",
            { c in
                .createConversation(
                    CreateConversation(
                        conversationID: .random(), participants: [c.other],
                        options: ConversationOptions(isDistinct: false)))
            }
        ),
        (
            "ADD_PARTICIPANTS",
            { c in
                .addParticipants(
                    ParticipantsUpdate(requestID: UUID(), conversationID: c.conversation, users: ["carol"]))
            }
        ),
        (
            "REMOVE_PARTICIPANTS",
            { c in
                .removeParticipants(
                    ParticipantsUpdate(requestID: UUID(), conversationID: c.conversation, users: ["carol"]))
            }
        ),
        (
            "SET_METADATA",
            { c in
                .setMetadata(
                    SetMetadata(
                        requestID: UUID(), conversationID: c.conversation, keyPath: try! MetadataKeyPath(["title"]),
                        value: .string("conformance")))
            }
        ),
        (
            "DELETE_METADATA",
            { c in
                .deleteMetadata(
                    DeleteMetadata(
                        requestID: UUID(), conversationID: c.conversation, keyPath: try! MetadataKeyPath(["title"])))
            }
        ),
        (
            "MARK_ALL_READ",
            { c in .markAllRead(MarkAllRead(requestID: UUID(), conversationID: c.conversation, upTo: c.position)) }
        ),
        (
            "SET_NOTIFICATION_LEVEL",
            { c in
                .setNotificationLevel(
                    SetNotificationLevel(requestID: UUID(), conversationID: c.conversation, level: .mentions))
            }
        ),
        (
            "SEND_MESSAGE",
            { c in
                .sendMessage(
                    SendMessage(
                        messageID: .random(), conversationID: c.conversation,
                        parts: [try! MessagePart(text: "conformance")]))
            }
        ),
        (
            "SEND_REPLY",
            { c in
                .sendMessage(
                    SendMessage(
                        messageID: .random(), conversationID: c.conversation,
                        parts: [try! MessagePart(text: "conformance reply")], replyTo: c.message))
            }
        ),
        (
            "MARK_READ",
            { c in .markRead(MarkRead(requestID: UUID(), conversationID: c.conversation, messageID: c.message)) }
        ),
        (
            "UPDATE_MESSAGE_PARTS",
            { c in
                .updateMessageParts(
                    UpdateMessageParts(
                        requestID: UUID(), conversationID: c.conversation, messageID: c.message,
                        parts: [try! MessagePart(text: "setup, updated")]))
            }
        ),
        (
            "REACT",
            { c in
                .react(
                    React(
                        requestID: UUID(), conversationID: c.conversation, messageID: c.message, key: "+1", op: .add))
            }
        ),
        (
            "DELIVERY_RECEIPT",
            { c in
                .deliveryReceipt(DeliveryReceipt(requestID: UUID(), conversationID: c.conversation, upTo: c.position))
            }
        ),
        (
            "DELETE_MESSAGE",
            { c in
                .deleteMessage(
                    DeleteMessage(
                        requestID: UUID(), conversationID: c.conversation, messageID: c.message, mode: .myDevices))
            }
        ),
        ("SYNC", { _ in .sync(SyncRequest(requestID: UUID(), cursor: 0)) }),
        (
            "FETCH_HISTORY",
            { c in .fetchHistory(FetchHistory(requestID: UUID(), conversationID: c.conversation, policy: .lastN(1))) }
        ),
        (
            "SEARCH_MESSAGES",
            { c in
                .searchMessages(SearchMessages(requestID: UUID(), text: "conformance", conversationID: c.conversation))
            }
        ),
        (
            "DELETE_CONVERSATION",
            { c in
                .deleteConversation(
                    DeleteConversation(requestID: UUID(), conversationID: c.conversation, mode: .myDevices))
            }
        ),
    ]

    static let typing: @Sendable (ProbeContext) -> Frame = { c in
        .typing(Typing(conversationID: c.conversation, state: .started))
    }

    static func commandID(_ frame: Frame) -> UUID? { frame.commandID }

    static func add(
        _ out: inout [Probe], _ state: SessionState, _ name: String,
        _ frame: @escaping @Sendable (ProbeContext) -> Frame, _ expected: Outcome,
        answerID: @escaping @Sendable (Frame) -> UUID? = { $0.commandID }, features: FeatureSet = .all,
        pipelined: (@Sendable (ProbeContext, Frame) -> Frame)? = nil
    ) {
        out.append(
            Probe(
                state: state, name: name, frame: frame, answerID: answerID, expected: expected, features: features,
                pipelined: pipelined))
    }

    static var probes: [Probe] {
        var out: [Probe] = []
        let none: @Sendable (Frame) -> UUID? = { _ in nil }
        let hello: @Sendable (ProbeContext) -> Frame = { _ in .hello(Hello(agent: "lamina-conformance")) }
        let nonceRequest: @Sendable (ProbeContext) -> Frame = { _ in .nonceRequest(NonceRequest(requestID: UUID())) }
        let badToken: @Sendable (ProbeContext) -> Frame = { _ in
            .authenticate(Authenticate(requestID: UUID(), identityToken: "not-a-jwt", deviceID: UUID()))
        }
        let resume: @Sendable (ProbeContext) -> Frame = { _ in
            .resumeSession(ResumeSession(requestID: UUID(), sessionToken: "no-such-session", deviceID: UUID()))
        }
        let ping: @Sendable (ProbeContext) -> Frame = { _ in .ping(Ping(payload: 7)) }
        let endSession: @Sendable (ProbeContext) -> Frame = { _ in .endSession(EndSession(requestID: UUID())) }
        let pong: @Sendable (ProbeContext) -> Frame = { _ in .pong(Ping(payload: 7)) }
        let removePushToken: @Sendable (ProbeContext) -> Frame = { _ in
            .registerPushToken(RegisterPushToken(requestID: UUID(), token: nil))
        }
        let unblock: @Sendable (ProbeContext) -> Frame = { _ in
            .blockUser(BlockUser(requestID: UUID(), user: "conformance-nobody", blocking: false))
        }
        let unfollow: @Sendable (ProbeContext) -> Frame = { _ in
            .followUser(FollowUser(requestID: UUID(), user: "conformance-nobody", following: false))
        }
        let away: @Sendable (ProbeContext) -> Frame = { _ in
            .setPresence(SetPresence(requestID: UUID(), status: .away))
        }
        let error: @Sendable (ProbeContext) -> Frame = { _ in
            .error(ErrorFrame(code: .internalError, reason: "a client-side failure", isFatal: false))
        }
        let fatalError: @Sendable (ProbeContext) -> Frame = { _ in
            .error(ErrorFrame(code: .internalError, reason: "a client-side failure", isFatal: true))
        }

        // Before HELLO: only HELLO; every other frame, an ERROR of either kind included, is a
        // fatal `unexpected-frame` (peer frames: `forbidden`) and the stream ends.
        add(&out, .beforeHello, "HELLO", hello, .frame("WELCOME"), answerID: none)
        for (name, frame) in [
            ("NONCE_REQUEST", nonceRequest), ("AUTHENTICATE", badToken), ("RESUME_SESSION", resume),
            ("END_SESSION", endSession), ("REGISTER_PUSH_TOKEN", removePushToken), ("BLOCK_USER", unblock),
            ("SET_PRESENCE", away), ("FOLLOW_USER", unfollow), ("PING", ping), ("PONG", pong), ("ERROR", error),
            ("ERROR (fatal)", fatalError),
        ] {
            add(&out, .beforeHello, name, frame, unexpected, answerID: none)
        }
        for (name, frame) in commands { add(&out, .beforeHello, name, frame, unexpected, answerID: none) }
        add(&out, .beforeHello, "TYPING", typing, unexpected, answerID: none)
        for (name, frame, outcome) in foreign {
            add(
                &out, .beforeHello, name, frame,
                name.hasPrefix("PEER") || name == "VERSION_VECTOR" || name == "REPLICATE" ? forbidden : outcome,
                answerID: none)
        }

        // Before authentication.
        add(&out, .beforeAuthentication, "HELLO", hello, unexpected, answerID: none)
        add(&out, .beforeAuthentication, "NONCE_REQUEST", nonceRequest, .frame("NONCE"))
        add(
            &out, .beforeAuthentication, "AUTHENTICATE",
            { c in .authenticate(Authenticate(requestID: UUID(), identityToken: c.token, deviceID: UUID())) },
            .frame("AUTHENTICATED"))
        add(&out, .beforeAuthentication, "AUTHENTICATE (bad token)", badToken, .error("malformed-token", fatal: false))
        add(
            &out, .beforeAuthentication, "RESUME_SESSION (unknown token)", resume,
            .error("session-expired", fatal: false))
        add(&out, .beforeAuthentication, "END_SESSION", endSession, authenticationRequired)
        add(&out, .beforeAuthentication, "REGISTER_PUSH_TOKEN", removePushToken, authenticationRequired)
        add(&out, .beforeAuthentication, "BLOCK_USER", unblock, authenticationRequired)
        add(&out, .beforeAuthentication, "SET_PRESENCE", away, authenticationRequired)
        add(&out, .beforeAuthentication, "FOLLOW_USER", unfollow, authenticationRequired)
        add(&out, .beforeAuthentication, "PING", ping, .frame("PONG"), answerID: none)
        add(&out, .beforeAuthentication, "PONG", pong, .nothing, answerID: none)
        add(&out, .beforeAuthentication, "ERROR", error, .nothing, answerID: none)
        add(&out, .beforeAuthentication, "ERROR (fatal)", fatalError, .streamEnded, answerID: none)
        for (name, frame) in commands { add(&out, .beforeAuthentication, name, frame, authenticationRequired) }
        add(&out, .beforeAuthentication, "TYPING", typing, authenticationRequired, answerID: none)
        for (name, frame, outcome) in foreign { add(&out, .beforeAuthentication, name, frame, outcome, answerID: none) }

        // Authenticated.
        add(&out, .authenticated, "HELLO", hello, unexpected, answerID: none)
        add(&out, .authenticated, "NONCE_REQUEST", nonceRequest, .frame("NONCE"))
        add(&out, .authenticated, "AUTHENTICATE", badToken, unexpected, answerID: none)
        add(&out, .authenticated, "RESUME_SESSION", resume, unexpected, answerID: none)
        add(&out, .authenticated, "REGISTER_PUSH_TOKEN (none: remove)", removePushToken, .frame("ACK"))
        add(&out, .authenticated, "BLOCK_USER (unblock, not blocked)", unblock, .frame("ACK"))
        add(&out, .authenticated, "SET_PRESENCE (away)", away, .frame("ACK"), features: FeatureSet.all.union(.presence))
        add(&out, .authenticated, "FOLLOW_USER (unfollow, not followed)", unfollow, .frame("ACK"))
        add(
            &out, .authenticated, "SET_PRESENCE (offline: not a choice)",
            { _ in .setPresence(SetPresence(requestID: UUID(), status: .offline)) },
            .error("invalid-argument", fatal: false), features: FeatureSet.all.union(.presence))
        add(&out, .authenticated, "END_SESSION", endSession, .frame("ACK"))
        add(&out, .authenticated, "PING", ping, .frame("PONG"), answerID: none)
        add(&out, .authenticated, "PONG", pong, .nothing, answerID: none)
        add(&out, .authenticated, "ERROR", error, .nothing, answerID: none)
        add(&out, .authenticated, "ERROR (fatal)", fatalError, .streamEnded, answerID: none)
        for (name, frame) in commands { add(&out, .authenticated, name, frame, .frame("ACK")) }
        add(&out, .authenticated, "TYPING", typing, .nothing, answerID: none)
        for (name, frame, outcome) in foreign { add(&out, .authenticated, name, frame, outcome, answerID: none) }

        // Authenticated, on a session whose HELLO did not offer the feature a frame needs
        // (SPEC §5.1): a non-fatal `forbidden`, with the frame's id (TYPING: without one).
        let notAgreed = Outcome.error("forbidden", fatal: false)
        let byName = Dictionary(uniqueKeysWithValues: commands.map { ($0.0, $0.1) })
        add(
            &out, .authenticated, "TYPING (without bit 1)", typing, notAgreed, answerID: none,
            features: FeatureSet.all.subtracting(.typingIndicators))
        add(
            &out, .authenticated, "DELIVERY_RECEIPT (without bit 2)", byName["DELIVERY_RECEIPT"]!, notAgreed,
            features: FeatureSet.all.subtracting(.deliveryReceipts))
        add(
            &out, .authenticated, "FETCH_HISTORY (without bit 3)", byName["FETCH_HISTORY"]!, notAgreed,
            features: FeatureSet.all.subtracting(.historyFetch))
        add(
            &out, .authenticated, "FETCH_HISTORY page-after (without bit 6)",
            { c in
                .fetchHistory(
                    FetchHistory(requestID: UUID(), conversationID: c.conversation, policy: .pageAfter(nil, count: 1)))
            }, notAgreed,
            features: FeatureSet.all.subtracting(.historyPaging))
        add(
            &out, .authenticated, "UPDATE_MESSAGE_PARTS (without bit 5)", byName["UPDATE_MESSAGE_PARTS"]!, notAgreed,
            features: FeatureSet.all.subtracting(.partUpdates))
        add(
            &out, .authenticated, "REACT (without bit 14)", byName["REACT"]!, notAgreed,
            features: FeatureSet.all.subtracting(.reactions))
        add(
            &out, .authenticated, "BLOCK_USER (without bit 8)", unblock, notAgreed,
            features: FeatureSet.all.subtracting(.blockLists))
        add(
            &out, .authenticated, "SET_PRESENCE (without bit 9)", away, notAgreed,
            features: FeatureSet.all.subtracting(.presence))
        add(
            &out, .authenticated, "FOLLOW_USER (without bit 10)", unfollow, notAgreed,
            features: FeatureSet.all.subtracting(.following))
        add(
            &out, .authenticated, "SET_NOTIFICATION_LEVEL (without bit 18)", byName["SET_NOTIFICATION_LEVEL"]!,
            notAgreed, features: FeatureSet.all.subtracting(.notificationLevels))
        add(
            &out, .authenticated, "CREATE_CONVERSATION with receipts byte 2 (without bit 13)",
            { _ in
                .createConversation(
                    CreateConversation(
                        conversationID: .random(), participants: ["conformance-nobody"],
                        options: ConversationOptions(
                            isDistinct: false, deliveryReceiptsEnabled: false, readReceiptsEnabled: true)))
            }, notAgreed,
            features: FeatureSet.all.subtracting(.receiptSwitches))
        add(
            &out, .authenticated, "SEARCH_MESSAGES (without bit 19)", byName["SEARCH_MESSAGES"]!, notAgreed,
            features: FeatureSet.all.subtracting(.messageSearch))
        add(
            &out, .authenticated, "SEND_REPLY (without bit 15)", byName["SEND_REPLY"]!, notAgreed,
            features: FeatureSet.all.subtracting(.replies))
        add(
            &out, .authenticated, "FETCH_HISTORY thread (without bit 15)",
            { c in
                .fetchHistory(
                    FetchHistory(
                        requestID: UUID(), conversationID: c.conversation,
                        policy: .thread(root: c.message, after: nil, count: 1)))
            }, notAgreed,
            features: FeatureSet.all.subtracting(.replies))

        // Order of effects (SPEC §5.7): a read pipelined behind a write sees the write.
        add(
            &out, .authenticated, "SEND_MESSAGE, FETCH_HISTORY right behind it", byName["SEND_MESSAGE"]!,
            .frame("ACK, the message before it"),
            pipelined: { c, _ in
                .fetchHistory(FetchHistory(requestID: UUID(), conversationID: c.conversation, policy: .lastN(1)))
            })
        return out
    }
}
