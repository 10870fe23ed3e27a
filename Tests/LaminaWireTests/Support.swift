import Foundation
import LaminaWire
import NIOCore

/// Helpers shared by the wire tests.
enum Support {
    /// The repository's Protocol/vectors folder, found from this file's path.
    static let vectorsRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Protocol/vectors")

    struct ValidVector: Decodable, Sendable {
        var name: String
        var description: String
        var hex: String
        var value: WireJSON
    }

    struct InvalidVector: Decodable, Sendable {
        var name: String
        var description: String
        var hex: String
        var error: String
    }

    static func load<T: Decodable>(_ kind: String, as: T.Type) -> [T] {
        let dir = vectorsRoot.appendingPathComponent(kind)
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [])
            .filter { $0.hasSuffix(".json") }.sorted()
        return files.compactMap { file in
            guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent(file).path) else {
                return nil
            }
            return try? JSONDecoder().decode(T.self, from: data)
        }
    }

    struct SkippedVector: Decodable, Sendable {
        var name: String
        var description: String
        var hex: String
        var frames: [WireJSON]
    }

    static let validVectors: [ValidVector] = load("valid", as: ValidVector.self)
    static let skippedVectors: [SkippedVector] = load("skipped", as: SkippedVector.self)
    static let invalidVectors: [InvalidVector] = load("invalid", as: InvalidVector.self)

    static func bytes(hex: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for c in hex.utf8 {
            let v: UInt8 = c <= 0x39 ? c &- 0x30 : (c | 0x20) &- 0x61 &+ 10
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return out
    }

    static func bytes(_ buffer: ByteBuffer) -> [UInt8] {
        buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
    }

    /// Feeds `chunks` to a fresh decoder, draining frames after each chunk, then finishes the
    /// stream. Returns the frames, or the first error.
    static func decodeStream(_ chunks: [ArraySlice<UInt8>], limits: WireLimits = .default) -> Result<[Frame], WireError>
    {
        var decoder = FrameDecoder(limits: limits)
        var frames: [Frame] = []
        do {
            for chunk in chunks {
                decoder.feed(ByteBuffer(bytes: chunk))
                while let frame = try decoder.next() { frames.append(frame) }
            }
            try decoder.finish()
            return .success(frames)
        } catch {
            return .failure(error)
        }
    }

    /// One byte at a time.
    static func dripFed(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] { bytes.indices.map { bytes[$0...$0] } }

    /// Two chunks split at `i`.
    static func split(_ bytes: [UInt8], at i: Int) -> [ArraySlice<UInt8>] { [bytes[..<i], bytes[i...]] }
}
