import Foundation
import GRDB
import LaminaModel

/// Conversions between model values and the columns that hold them.
enum StoreCoding {
    /// Maps a `UInt64` to an `Int64` that sorts in the same order (flips the top bit),
    /// so SQLite's signed comparisons order positions correctly.
    static func orderKey(_ value: UInt64) -> Int64 { Int64(bitPattern: value ^ (1 << 63)) }
    static func fromOrderKey(_ value: Int64) -> UInt64 { UInt64(bitPattern: value) ^ (1 << 63) }

    static func positionColumns(_ p: MessagePosition) -> (Int64, Int64, Int64) {
        (orderKey(p.physical), Int64(p.logical), orderKey(p.node.rawValue))
    }

    static func position(physical: Int64?, logical: Int64?, node: Int64?) throws(ClientError) -> MessagePosition? {
        guard let physical, let logical, let node else { return nil }
        guard let l = UInt32(exactly: logical) else {
            throw ClientError(.corruptRecord, "a message position's logical counter is out of range")
        }
        return MessagePosition(physical: fromOrderKey(physical), logical: l, node: NodeID(fromOrderKey(node)))
    }

    // MARK: metadata

    static func encode(_ metadata: Metadata) -> Data {
        (try? JSONSerialization.data(withJSONObject: jsonObject(metadata.values), options: [.sortedKeys]))
            ?? Data("{}".utf8)
    }

    private static func jsonObject(_ values: [String: MetadataValue]) -> [String: Any] {
        values.mapValues { value -> Any in
            switch value {
            case .string(let s): s
            case .dictionary(let d): jsonObject(d)
            }
        }
    }

    static func decodeMetadata(_ data: Data) throws(ClientError) -> Metadata {
        guard let object = try? JSONSerialization.jsonObject(with: data), let dict = object as? [String: Any],
            let values = metadataValues(dict, depth: 1)
        else {
            throw ClientError(.corruptRecord, "stored metadata is not a dictionary of strings")
        }
        return Metadata(values)
    }

    private static func metadataValues(_ dict: [String: Any], depth: Int) -> [String: MetadataValue]? {
        guard depth <= Limits.maxMetadataDepth else { return nil }
        var out: [String: MetadataValue] = [:]
        for (key, value) in dict {
            if let s = value as? String {
                out[key] = .string(s)
            } else if let d = value as? [String: Any], let inner = metadataValues(d, depth: depth + 1) {
                out[key] = .dictionary(inner)
            } else {
                return nil
            }
        }
        return out
    }

    // MARK: push configuration

    static func encode(_ push: PushConfiguration?) -> Data? {
        guard let push else { return nil }
        var dict: [String: Any] = ["data": push.data]
        if let v = push.alert { dict["alert"] = v }
        if let v = push.sound { dict["sound"] = v }
        if let v = push.title { dict["title"] = v }
        if let v = push.category { dict["category"] = v }
        return try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys])
    }

    static func decodePush(_ data: Data?) throws(ClientError) -> PushConfiguration? {
        guard let data else { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: data), let dict = object as? [String: Any],
            let custom = (dict["data"] ?? [String: String]()) as? [String: String]
        else {
            throw ClientError(.corruptRecord, "a stored push configuration is malformed")
        }
        return PushConfiguration(
            alert: dict["alert"] as? String, sound: dict["sound"] as? String,
            title: dict["title"] as? String, category: dict["category"] as? String, data: custom)
    }

    // MARK: checked column reads

    static func user(_ raw: String) throws(ClientError) -> UserID {
        do { return try UserID(raw) } catch {
            throw ClientError(.corruptRecord, "a stored user id is invalid: \(error)")
        }
    }

    static func mime(_ raw: String) throws(ClientError) -> MIMEType {
        do { return try MIMEType(raw) } catch {
            throw ClientError(.corruptRecord, "a stored MIME type is invalid: \(error)")
        }
    }

    static func uuid(_ row: Row, _ column: String) throws(ClientError) -> UUID {
        guard let data = row[column] as Data?, data.count == 16 else {
            throw ClientError(.corruptRecord, "column \(column) does not hold a 16-byte identifier")
        }
        return uuid(data)
    }

    static func optionalUUID(_ row: Row, _ column: String) throws(ClientError) -> UUID? {
        guard let data = row[column] as Data? else { return nil }
        guard data.count == 16 else {
            throw ClientError(.corruptRecord, "column \(column) does not hold a 16-byte identifier")
        }
        return uuid(data)
    }

    static func uuid(_ data: Data) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeMutableBytes { _ = data.copyBytes(to: $0) }
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    static func blob(_ uuid: UUID) -> Data { withUnsafeBytes(of: uuid.uuid) { Data($0) } }
    static func blob<I: LaminaIdentifier>(_ id: I) -> Data { blob(id.uuid) }
}
