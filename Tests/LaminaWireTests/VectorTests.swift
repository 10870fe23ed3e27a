import Foundation
import LaminaWire
import NIOCore
import Testing

/// Protocol/vectors: every valid vector decodes to its value and re-encodes to its bytes,
/// whole, drip-fed and split at every position; every invalid vector fails with its error.
@Suite struct VectorTests {
    @Test func vectorsArePresentForEveryFrameType() {
        #expect(Support.validVectors.count >= FrameType.allCases.count)
        let types = Set(
            Support.validVectors.compactMap { v -> String? in
                if case .object(let o) = v.value, case .string(let t)? = o["type"] { return t }
                return nil
            })
        for type in FrameType.allCases { #expect(types.contains(type.name), "no valid vector for \(type.name)") }
        #expect(Support.invalidVectors.count >= 20)
    }

    @Test(arguments: Support.validVectors.map(\.name))
    func validVectorDecodesAndReencodes(_ name: String) throws {
        let vector = try #require(Support.validVectors.first { $0.name == name })
        let bytes = Support.bytes(hex: vector.hex)
        let frame = try Frame.decode(exactly: ByteBuffer(bytes: bytes))
        #expect(frame.readableJSON == vector.value)
        #expect(Support.bytes(try frame.encoded()) == bytes)
        // Encoding into a buffer that already holds bytes appends exactly the frame.
        var buffer = ByteBuffer(bytes: [0xAA, 0xBB])
        try frame.encode(into: &buffer)
        #expect(Support.bytes(buffer) == [0xAA, 0xBB] + bytes)
    }

    @Test(arguments: Support.validVectors.map(\.name))
    func validVectorDecodesDripFedAndSplit(_ name: String) throws {
        let vector = try #require(Support.validVectors.first { $0.name == name })
        let bytes = Support.bytes(hex: vector.hex)
        let expected = try Frame.decode(exactly: ByteBuffer(bytes: bytes))
        #expect(try Support.decodeStream(Support.dripFed(bytes)).get() == [expected])
        for i in 0...bytes.count {
            #expect(try Support.decodeStream(Support.split(bytes, at: i)).get() == [expected], "split at \(i)")
        }
    }

    @Test func skippedVectorsArePresent() {
        #expect(Support.skippedVectors.count >= 3)
    }

    /// SPEC §2.2, §8: a SKIPPABLE frame of an unknown type disappears from the decoded stream,
    /// whatever the split; the frames around it decode as they are.
    @Test(arguments: Support.skippedVectors.map(\.name))
    func skippedVectorDecodesToItsFramesInAnySplit(_ name: String) throws {
        let vector = try #require(Support.skippedVectors.first { $0.name == name })
        let bytes = Support.bytes(hex: vector.hex)
        #expect(try Support.decodeStream(Support.dripFed(bytes)).get().map(\.readableJSON) == vector.frames)
        for i in 0...bytes.count {
            #expect(
                try Support.decodeStream(Support.split(bytes, at: i)).get().map(\.readableJSON) == vector.frames,
                "split at \(i)")
        }
    }

    @Test(arguments: Support.invalidVectors.map(\.name))
    func invalidVectorFailsWithItsError(_ name: String) throws {
        let vector = try #require(Support.invalidVectors.first { $0.name == name })
        let expected = try #require(WireError.Code(name: vector.error), "unknown error name \(vector.error)")
        let bytes = Support.bytes(hex: vector.hex)
        do {
            let frame = try Frame.decode(exactly: ByteBuffer(bytes: bytes))
            Issue.record("decoded to \(frame)")
        } catch {
            #expect(error.code == expected, "\(error)")
        }
        for (label, chunks) in [("drip-fed", Support.dripFed(bytes)), ("whole", [bytes[...]])] {
            switch Support.decodeStream(chunks) {
            case .success(let frames): Issue.record("\(label): decoded to \(frames)")
            case .failure(let error): #expect(error.code == expected, "\(label): \(error)")
            }
        }
        for i in 0...bytes.count {
            switch Support.decodeStream(Support.split(bytes, at: i)) {
            case .success(let frames): Issue.record("split at \(i): decoded to \(frames)")
            case .failure(let error): #expect(error.code == expected, "split at \(i): \(error)")
            }
        }
    }

    @Test func allValidVectorsInOneStreamDecodeInAnySplit() throws {
        var stream = [UInt8]()
        var expected = [Frame]()
        for v in Support.validVectors {
            let bytes = Support.bytes(hex: v.hex)
            stream += bytes
            expected.append(try Frame.decode(exactly: ByteBuffer(bytes: bytes)))
        }
        #expect(try Support.decodeStream(Support.dripFed(stream)).get() == expected)
        var rng = SplitMix64(seed: 0x5EED_0001)
        for _ in 0..<200 {
            var chunks: [ArraySlice<UInt8>] = []
            var i = 0
            while i < stream.count {
                let n = Int.random(in: 1...600, using: &rng)
                chunks.append(stream[i..<min(stream.count, i + n)])
                i += n
            }
            #expect(try Support.decodeStream(chunks).get() == expected)
        }
    }
}
