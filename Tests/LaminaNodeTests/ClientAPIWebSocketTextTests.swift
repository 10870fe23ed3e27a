import Foundation
import LaminaModel
import Testing

@testable import LaminaNode

/// The Client API WebSocket's hand-written JSON (JSONText, WebSocketPacketText,
/// JSONTextParser, ClientAPIDate) against Foundation's: the same values both ways.
@Suite struct ClientAPIWebSocketTextTests {
    /// `value` through JSONText, read back by JSONDecoder.
    static func viaText(_ value: some JSONTextWritable) throws -> JSONValue {
        var json = JSONText()
        value.write(to: &json)
        return try JSONDecoder().decode(JSONValue.self, from: Data(json.bytes))
    }

    /// `value` through JSONEncoder, read back by JSONDecoder.
    static func viaEncoder(_ value: some Encodable) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: ServerAPIJSON.encode(value))
    }

    static let awkward = [
        "", "plain", "quote \" and backslash \\ and slash /", "tab\tline\nreturn\rbell\u{07}nul\u{0}",
        "\u{1F}\u{08}\u{0C}", "é ü 日本 🎉 \u{2028}\u{2029}", "{\"json\": [1, 2]}",
    ]

    @Test func stringsAreEscapedAsRFC8259Requires() throws {
        for text in Self.awkward {
            var json = JSONText()
            json.string(text)
            let back = try JSONDecoder().decode(String.self, from: Data(json.bytes))
            #expect(back == text)
            // No raw control character, and `/` left as it is.
            #expect(!json.bytes.contains { $0 < 0x20 })
            #expect(String(decoding: json.bytes, as: UTF8.self).contains("\\/") == false)
        }
    }

    static func identity(full: Bool) -> ClientIdentityObject {
        var identity = ClientIdentityObject(
            id: "layer:///identities/al\"ice", url: "https://127.0.0.1:7443/identities/alice", user_id: "al\"ice",
            display_name: "Alice \u{1F}", identity_type: "user")
        if full {
            identity.avatar_url = "https://x/a.png"
            identity.first_name = "Al"
            identity.last_name = "Ice"
            identity.phone_number = "+1"
            identity.email_address = "a@x"
            identity.public_key = "k"
            identity.metadata = ["b": "2", "a": "1\n"]
            identity.name = "n"
        }
        return identity
    }

    static func message(full: Bool) -> ClientMessageObject {
        var parts = [ClientPartObject(id: "layer:///messages/m/parts/p", mime_type: "text/plain", body: "hi \"there\"")]
        if full {
            parts.append(
                ClientPartObject(
                    id: "layer:///messages/m/parts/q", url: "u", mime_type: "image/png", encoding: "base64",
                    content: ClientContentObject(
                        id: "c", size: 12_345_678_901, download_url: "https://d",
                        expiration: "2026-01-01T00:00:00.000Z",
                        refresh_url: "https://r")))
        }
        var message = ClientMessageObject(
            id: "layer:///messages/m", url: "https://127.0.0.1:7443/messages/m",
            conversation: ClientReference(
                id: "layer:///conversations/c", url: "https://127.0.0.1:7443/conversations/c"),
            parts: parts, sent_at: full ? "2026-11-29T12:00:00.123Z" : nil, received_at: full ? "x" : nil,
            sender: identity(full: full), is_unread: full,
            recipient_status: full ? ["layer:///identities/bob": "read", "layer:///identities/alice": "sent"] : [:],
            position: full ? 9_007_199_254_740_991 : 0)
        if full {
            // Lamina's extensions: what REST shows, the packets show too.
            message.reply_to = "layer:///messages/r\"oot"
            message.thread = ClientThreadObject(reply_count: 3, last_reply: "layer:///messages/l")
            message.edited_at = "2026-11-29T12:00:01.000Z"
            message.mentions = ["layer:///identities/bob", "layer:///identities/é"]
            message.reactions = [
                "\u{1F44D}": ReactionSummaryObject(
                    count: 2, user_ids: ["layer:///identities/a", "layer:///identities/b"]),
                "+1\"": ReactionSummaryObject(count: 1, user_ids: ["layer:///identities/c"]),
            ]
        }
        return message
    }

    @Test func packetsMeanWhatTheirEncodableFormsMean() throws {
        for full in [false, true] {
            let message = Self.message(full: full)
            let reference = WebSocketObjectReference(type: "Message", id: message.id, url: message.url)
            let change = WebSocketOutboundPacket(
                type: "change", counter: 12_345, timestamp: "2026-11-29T12:00:00.123Z",
                body: WebSocketChangeBody(operation: "create", object: reference, data: message))
            #expect(try Self.viaText(change) == Self.viaEncoder(change))

            let response = WebSocketOutboundPacket(
                type: "response", counter: 0, timestamp: "t",
                body: WebSocketResponseBody(request_id: full ? "r\"1" : nil, success: full, data: message))
            #expect(try Self.viaText(response) == Self.viaEncoder(response))

            let conversation = ClientConversationObject(
                id: "layer:///conversations/c", url: "u", messages_url: "m", created_at: "2026-11-29T12:00:00.000Z",
                participants: [Self.identity(full: full), Self.identity(full: !full)], distinct: full,
                metadata: ["title": .string("T\u{0}"), "nested": .object(["a": .integer(-3), "b": .number(0.25)])],
                unread_message_count: 3, total_message_count: 40, last_message: full ? message : nil)
            #expect(try Self.viaText(conversation) == Self.viaEncoder(conversation))

            let announcement = ClientAnnouncementObject(
                id: "layer:///announcements/a", url: "u", parts: message.parts, sent_at: message.sent_at,
                received_at: message.received_at, sender: ClientIdentityObject(display_name: "Admin", name: "Admin"),
                is_unread: true, recipient_status: message.recipient_status, position: 7)
            #expect(try Self.viaText(announcement) == Self.viaEncoder(announcement))
        }
        let patches = WebSocketChangeBody(
            operation: "update", object: WebSocketObjectReference(type: "Conversation", id: "c", url: "u"),
            data: [
                WebSocketPatchOperation(operation: "set", property: "unread_message_count", value: .integer(2)),
                WebSocketPatchOperation(operation: "delete", property: "metadata.a.b"),
                WebSocketPatchOperation(operation: "set", property: "x", value: .null),
                WebSocketPatchOperation(
                    operation: "add", property: "participants", value: .array([.bool(true), .string("é")])),
            ])
        #expect(try Self.viaText(patches) == Self.viaEncoder(patches))
        let signal = WebSocketSignalBody(
            object: .init(id: "layer:///conversations/c"),
            data: .init(action: "started", sender: Self.identity(full: true)))
        #expect(try Self.viaText(signal) == Self.viaEncoder(signal))
        for deletion in [
            WebSocketDeletionData(mode: "my_devices", from_position: 42),
            WebSocketDeletionData(mode: "all_participants"),
        ] {
            #expect(try Self.viaText(deletion) == Self.viaEncoder(deletion))
        }
        let error = ClientErrorObject(
            id: "invalid_property", code: 105, message: "bad \"x\"", url: "https://h/errors#invalid_property",
            data: ["property": .string("data.id")])
        #expect(try Self.viaText(error) == Self.viaEncoder(error))
        #expect(try Self.viaText(WebSocketCounterData(counter: 9)) == Self.viaEncoder(WebSocketCounterData(counter: 9)))
    }

    /// Random JSON trees: written by JSONText, parsed by JSONTextParser and by JSONDecoder,
    /// all three the same value.
    @Test func parserAgreesWithJSONDecoderOnRandomTrees() throws {
        var rng = SplitMix(seed: 0x5EED)
        for _ in 0..<300 {
            let value = Self.randomValue(&rng, depth: 0)
            var json = JSONText()
            value.write(to: &json)
            let text = String(decoding: json.bytes, as: UTF8.self)
            let parsed = try JSONTextParser.parse(text)
            #expect(parsed == value, "\(text)")
            let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(json.bytes))
            #expect(parsed == decoded, "\(text)")
        }
    }

    static func randomValue(_ rng: inout SplitMix, depth: Int) -> JSONValue {
        switch rng.next() % (depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(rng.next() % 2 == 0)
        case 2: return .integer(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63))
        case 3: return .number(Double(Int64(bitPattern: rng.next()) >> 20) / 1_024 + 0.5)
        case 4: return .string(awkward[Int(rng.next() % UInt64(awkward.count))])
        case 5: return .array((0..<Int(rng.next() % 4)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<Int(rng.next() % 4) {
                object[awkward[Int(rng.next() % UInt64(awkward.count))] + "k"] = randomValue(&rng, depth: depth + 1)
            }
            return .object(object)
        }
    }

    @Test func parserReadsWhatJSONDecoderReads() throws {
        let texts = [
            #" { "type" : "request" , "body" : { "request_id" : "1", "data" : [ ] , "e": {} } } "#,
            #"["\u00e9\ud83c\udf89\/\b\f\n\r\t\"\\", -0, 0, 12, -9223372036854775808, 9223372036854775807]"#,
            #"[18446744073709551616, 1.5, -2.5e-3, 0.1]"#, "true", "false", "null", #""x""#,
        ]
        for text in texts {
            let mine = try JSONTextParser.parse(text)
            let theirs = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
            #expect(mine == theirs, "\(text)")
        }
        #expect(try JSONTextParser.parse("[1E2]") == .array([.number(100)]))
        #expect(try JSONTextParser.parse("-7") == .integer(-7))
        #expect(try JSONTextParser.parse(#"{"a": 1, "a": 2}"#) == .object(["a": .integer(2)]))
    }

    @Test func parserRefusesWhatIsNotJSON() {
        let bad = [
            "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "[01]", "[1.]", "[.5]", "[1e]", "[-]",
            "[+1]", "\"tab\tin string\"", #""\ud83c""#, #""\udf89""#, #""\ud83cx""#, #""\x""#, #""\u12g4""#,
            "\"open", "tru", "nulls", "[1] [2]", "[NaN]", "[1e999]", "{\"a\":1}x",
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ]
        for text in bad {
            #expect(throws: JSONTextParser.Failure.self, "\(text.prefix(40))") { try JSONTextParser.parse(text) }
        }
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(throws: Never.self) { try JSONTextParser.parse(deepest) }
    }

    @Test func uuidsAndPathSegmentsAsFoundationWritesThem() {
        for _ in 0..<200 {
            let uuid = UUID()
            #expect(ClientAPIRepresentation.lowercase(uuid) == uuid.uuidString.lowercased())
        }
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#")
        for user in ["alice", "Bob-1.2_x~", "a b", "a/b", "ü", "a?b#c", "100%", ""] {
            #expect(
                ClientAPIRepresentation.pathSegment(user)
                    == (user.addingPercentEncoding(withAllowedCharacters: allowed) ?? user))
        }
    }

    @Test func datesAreServerAPIDates() {
        var rng = SplitMix(seed: 42)
        var samples: [Int64] = [0, 1, 999, 1_000, 86_399_999, 86_400_000, 951_782_400_000, 1_764_417_600_123]
        // Leap days, ends of months and years, up to 9999-12-31T23:59:59.999Z.
        samples += [951_868_799_999, 4_107_542_399_999, 253_402_300_799_999, 253_402_300_800_000, -1, -86_400_001]
        for _ in 0..<2_000 { samples.append(Int64(rng.next() % 253_402_300_800_000)) }
        for ms in samples {
            #expect(ClientAPIDate.string(millisecondsSince1970: ms) == ServerAPIJSON.date(millisecondsSince1970: ms))
        }
    }
}

/// A small deterministic generator (SplitMix64).
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
