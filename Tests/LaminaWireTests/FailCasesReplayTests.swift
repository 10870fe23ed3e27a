import Foundation
import LaminaWire
import LaminaWireFuzzChecks
import Testing

/// Replays every input saved in `Fuzz/FailCases/` and every vector in `Protocol/vectors/`
/// through the three properties the fuzz targets check (`WireFuzzChecks`): decode,
/// round-trip and split-feed. A violation is reported as a failed expectation.
@Suite("Fuzz fail cases and vectors replayed through the fuzz properties")
struct FailCasesReplayTests {
    /// The repository root, found from this file's path.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // LaminaWireTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    struct Vector: Decodable {
        var name: String
        var hex: String
        var bytes: [UInt8] { Self.bytes(fromHex: hex) }

        static func bytes(fromHex hex: String) -> [UInt8] {
            let digits = Array(hex.utf8.filter { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) })
            var bytes: [UInt8] = []
            bytes.reserveCapacity(digits.count / 2)
            var index = 0
            while index + 1 < digits.count {
                guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
                    break
                }
                bytes.append(byte)
                index += 2
            }
            return bytes
        }
    }

    static func vectors(_ kind: String) throws -> [Vector] {
        let folder = root.appendingPathComponent("Protocol/vectors/\(kind)")
        let files = try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        return try files.map { try JSONDecoder().decode(Vector.self, from: Data(contentsOf: $0)) }
    }

    /// Runs all three properties on one input, recording each violation.
    static func expectAllProperties(_ input: [UInt8], _ label: String) {
        do { try WireFuzzChecks.checkDecode(input) } catch { Issue.record("\(label): \(error)") }
        do { try WireFuzzChecks.checkRoundTrip(input) } catch { Issue.record("\(label): \(error)") }
        do { try WireFuzzChecks.checkSplitFeed(fuzzInput: input) } catch { Issue.record("\(label): \(error)") }
    }

    @Test("every file in Fuzz/FailCases holds every property")
    func failCases() throws {
        let folder = Self.root.appendingPathComponent("Fuzz/FailCases")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { !$0.hasPrefix(".") && $0 != "README.md" }
            .sorted()
        for name in names {
            let input = try [UInt8](Data(contentsOf: folder.appendingPathComponent(name)))
            Self.expectAllProperties(input, "Fuzz/FailCases/\(name)")
        }
    }

    @Test("every valid vector round-trips, and decodes the same in any split")
    func validVectors() throws {
        let vectors = try Self.vectors("valid")
        #expect(!vectors.isEmpty, "Protocol/vectors/valid has no vectors")
        for vector in vectors {
            let bytes = vector.bytes
            Self.expectAllProperties(bytes, "valid/\(vector.name)")
            switch try WireFuzzChecks.checkRoundTrip(bytes) {
            case .roundTripped: break
            case .rejected(let code): Issue.record("valid/\(vector.name) was rejected: \(code)")
            }
            // Byte by byte, then split in two at every position.
            try WireFuzzChecks.checkSplitFeed(stream: bytes, chunkSizes: [1])
            for cut in 0...bytes.count {
                try WireFuzzChecks.checkSplitFeed(stream: bytes, chunkSizes: [cut, bytes.count])
            }
        }
    }

    @Test("all valid vectors back to back decode as a stream of that many frames, in any split")
    func validVectorStream() throws {
        let vectors = try Self.vectors("valid")
        let stream = vectors.flatMap(\.bytes)
        let outcome = try WireFuzzChecks.checkDecode(stream)
        #expect(outcome.frames.count == vectors.count)
        #expect(outcome.end == .complete)
        for sizes in [[1], [2, 3, 5, 7], [0, 13], [64, 1, 255]] {
            try WireFuzzChecks.checkSplitFeed(stream: stream, chunkSizes: sizes)
        }
    }

    @Test("every invalid vector is rejected and holds every property")
    func invalidVectors() throws {
        let vectors = try Self.vectors("invalid")
        #expect(!vectors.isEmpty, "Protocol/vectors/invalid has no vectors")
        for vector in vectors {
            let bytes = vector.bytes
            Self.expectAllProperties(bytes, "invalid/\(vector.name)")
            if case .roundTripped = try WireFuzzChecks.checkRoundTrip(bytes) {
                Issue.record("invalid/\(vector.name) decoded as a valid frame")
            }
            try WireFuzzChecks.checkSplitFeed(stream: bytes, chunkSizes: [1])
        }
    }
}
