import LaminaModel
import LaminaWire
import NIOCore
import Testing

@Suite struct ErrorCodeTests {
    @Test func codesAndNamesAreUnique() {
        let all = WireError.Code.all
        #expect(Set(all.map(\.wireValue)).count == all.count)
        #expect(Set(all.map(\.name)).count == all.count)
        for code in all {
            #expect(!code.name.hasPrefix("unassigned-"))
            #expect(WireError.Code(name: code.name) == code)
        }
        #expect(WireError.Code(wireValue: 4_242).name == "unassigned-4242")
        #expect(WireError.Code(name: "no-such-code") == nil)
    }

    @Test func everyModelCodeMapsToItsOwnWireCode() {
        let model: [ModelError.Code] = [
            .invalidIdentifier, .invalidUserID, .invalidMIMEType, .noParts, .tooManyParts, .partTooLarge,
            .inlineTooLarge,
            .invalidContentReference, .noParticipants, .tooManyParticipants, .invalidMetadata,
            .invalidPushConfiguration, .duplicatePart,
        ]
        for code in model {
            let wire = WireError.Code(code)
            #expect(wire != .invalidArgument)
            #expect(wire.name == code.rawValue, "model \(code) maps to \(wire.name)")
        }
        #expect(WireError.Code(ModelError.Code(rawValue: "something-new")) == .invalidArgument)
        let error = WireError(ModelError(.noParts, "a message needs at least one part"))
        #expect(error.code == .noParts)
        #expect(error.reason == "a message needs at least one part")
    }

    @Test func contentCodesFollowTheSpecTable() {
        // SPEC §9.6: the codes of rich content transfer (Protocol/CONTENT.md).
        let expected: [(WireError.Code, UInt16, String)] = [
            (.contentNotReady, 600, "content-not-ready"),
            (.contentNotFound, 601, "content-not-found"),
            (.contentDigestMismatch, 602, "content-digest-mismatch"),
            (.uploadOffsetMismatch, 603, "upload-offset-mismatch"),
            (.uploadMismatch, 604, "upload-mismatch"),
            (.uploadTooLong, 605, "upload-too-long"),
            (.uploadStalled, 606, "upload-stalled"),
        ]
        for (code, value, name) in expected {
            #expect(code.wireValue == value)
            #expect(code.name == name)
            #expect(WireError.Code(name: name) == code)
            #expect(WireError.Code.all.contains(code))
            #expect(!code.closesStream)
        }
        #expect(WireError.Code(wireValue: 607).name == "unassigned-607")
    }

    @Test func wireErrorsCloseTheStream() {
        #expect(WireError.Code.malformed.closesStream)
        #expect(WireError.Code.frameTooLarge.closesStream)
        #expect(!WireError.Code.notAParticipant.closesStream)
        let frame = ErrorFrame(WireError(.malformed, String(repeating: "é", count: 2_000)))
        #expect(frame.isFatal)
        #expect(frame.reason.utf8.count <= 1_024)
        #expect(throws: Never.self) { try Frame.error(frame).encoded() }
    }

    @Test func encoderRefusesInvalidValuesAndLeavesTheBufferAlone() throws {
        let c = ConversationID.random()
        let cases: [(Frame, WireError.Code)] = [
            (.sendMessage(SendMessage(messageID: .random(), conversationID: c, parts: [])), .noParts),
            (
                .sendMessage(
                    SendMessage(
                        messageID: .random(), conversationID: c,
                        parts: Array(repeating: try MessagePart(text: "x"), count: 1_001))), .tooManyParts
            ),
            (
                .sendMessage(
                    SendMessage(
                        messageID: .random(), conversationID: c,
                        parts: [MessagePart(mimeType: .textPlain, content: .inline(Array(repeating: 1, count: 2_049)))])
                ), .inlineTooLarge
            ),
            (
                .sendMessage(
                    SendMessage(
                        messageID: .random(), conversationID: c,
                        parts: [
                            MessagePart(
                                mimeType: "image/png",
                                content: .external(ContentReference(id: .random(), size: 1, sha256: [1])))
                        ])), .invalidContentReference
            ),
            (.hello(Hello(agent: String(repeating: "a", count: 1_025))), .limitExceeded),
            (.changeBatch(ChangeBatch(changes: [])), .invalidArgument),
            (.replicate(Replicate(operations: [])), .invalidArgument),
            (.hello(Hello(minVersion: 2, maxVersion: 1, agent: "x")), .invalidArgument),
            (.peerHello(PeerHello(nodeID: NodeID(1), minVersion: 0, maxVersion: 1, cluster: "c")), .invalidArgument),
            (
                .authenticated(
                    Authenticated(
                        requestID: .init(), sessionToken: String(repeating: "t", count: 8_192),
                        identity: Identity(
                            userID: "u", displayName: String(repeating: "n", count: 1_024),
                            avatarURL: String(repeating: "a", count: 1_025)), expiresAt: .now())), .limitExceeded
            ),
            (
                .createConversation(
                    CreateConversation(
                        conversationID: c, participants: [],
                        options: ConversationOptions(metadata: ["a.b": .string("x")]))), .invalidMetadata
            ),
            (.fetchHistory(FetchHistory(requestID: .init(), conversationID: c, policy: .lastN(0))), .invalidArgument),
        ]
        for (frame, code) in cases {
            var buffer = ByteBuffer(bytes: [1, 2, 3])
            do {
                try frame.encode(into: &buffer)
                Issue.record("encoded \(frame.type.name)")
            } catch { #expect(error.code == code, "\(error)") }
            #expect(Support.bytes(buffer) == [1, 2, 3])
        }
    }
}
