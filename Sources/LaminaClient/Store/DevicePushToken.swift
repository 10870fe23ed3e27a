import Foundation
import GRDB
import LaminaModel

/// The push token the app last set for this device, kept in the local store so that every
/// session registers it (SPEC §5.9): one set while offline, or lost by the node (a restore, a
/// move to another node of a cluster), reaches the node on the next connect. `token` nil: the
/// app removed it (the removal is registered too).
public struct DevicePushToken: Sendable, Hashable {
    public var token: PushToken?

    public init(token: PushToken?) { self.token = token }
}

extension DevicePushToken {
    /// `store_info` value: `none`, `apns <environment> <topic> <hex token>`, `fcm <token>`,
    /// `gateway <token>` (tokens and topics are printable ASCII without spaces).
    var stored: String {
        switch token {
        case nil: "none"
        case .apns(let bytes, let topic, let environment)?:
            "apns \(environment.rawValue) \(topic) \(bytes.map { String(format: "%02x", $0) }.joined())"
        case .fcm(let text)?: "fcm \(text)"
        case .gateway(let text)?: "gateway \(text)"
        }
    }

    init?(stored: String) {
        let fields = stored.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        switch fields.first {
        case "none" where fields.count == 1: token = nil
        case "fcm" where fields.count == 2: token = .fcm(token: fields[1])
        case "gateway" where fields.count == 2: token = .gateway(token: fields[1])
        case "apns" where fields.count == 4:
            let hex = Array(fields[3].utf8)
            guard hex.count % 2 == 0, let raw = UInt8(fields[1]), let environment = APNsEnvironment(rawValue: raw)
            else { return nil }
            var bytes: [UInt8] = []
            for i in stride(from: 0, to: hex.count, by: 2) {
                guard let byte = UInt8(String(decoding: hex[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(byte)
            }
            token = .apns(token: bytes, topic: fields[2], environment: environment)
        default: return nil
        }
    }
}

extension LocalStore {
    /// The push token the app last set for this device (nil: it never set one).
    public func devicePushToken() throws(ClientError) -> DevicePushToken? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'push_token'").flatMap(
                DevicePushToken.init(stored:))
        }
    }

    /// Keeps `token` as this device's push token (nil: forgets it, as after the node refused it).
    public func setDevicePushToken(_ token: DevicePushToken?) throws(ClientError) {
        try write { ctx in
            if let token {
                try ctx.db.execute(
                    sql:
                        "INSERT INTO store_info(key, value) VALUES ('push_token', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    arguments: [token.stored])
            } else {
                try ctx.db.execute(sql: "DELETE FROM store_info WHERE key = 'push_token'")
            }
        }
    }
}
