import Foundation
import LaminaModel
import LaminaWire
import NIOCore
import Testing

/// Seeded, reproducible round trips over generated frames of every type.
@Suite struct RoundTripTests {
    @Test(arguments: FrameType.allCases)
    func everyTypeRoundTrips(_ type: FrameType) throws {
        var gen = RandomFrames(seed: 0xC0DE_0000 &+ UInt64(type.rawValue))
        for i in 0..<150 {
            let frame = gen.frame(type)
            let bytes = Support.bytes(try frame.encoded())
            let decoded = try Frame.decode(exactly: ByteBuffer(bytes: bytes))
            #expect(decoded == frame, "case \(i)")
            #expect(Support.bytes(try decoded.encoded()) == bytes, "case \(i)")
            // The readable form is a function of the value.
            #expect(decoded.readableJSON == frame.readableJSON)
        }
    }

    /// A change event encoded once for many feeds gives, for each seq, the very bytes of the
    /// change encoded on its own, and changing the event drops the shared encoding.
    @Test func aSharedChangeEventEncodesAsTheChangeItself() throws {
        var gen = RandomFrames(seed: 0x5A4E_D000)
        for i in 0..<300 {
            guard case .change(let change) = gen.frame(.change) else { continue }
            let shared = try SharedChangeEvent(change.event)
            for seq: UInt64 in [0, 1, 300, change.seq, .max] {
                let alone = Support.bytes(try Frame.change(Change(seq: seq, event: change.event)).encoded())
                let copied = Support.bytes(try Frame.change(Change(seq: seq, shared: shared)).encoded())
                #expect(copied == alone, "case \(i) seq \(seq)")
            }
            guard case .change(let other) = gen.frame(.change) else { continue }
            var changed = Change(seq: 7, shared: shared)
            changed.event = other.event
            #expect(
                Support.bytes(try Frame.change(changed).encoded())
                    == Support.bytes(try Frame.change(Change(seq: 7, event: other.event)).encoded()))
        }
    }

    @Test func thousandsOfMixedFramesRoundTripThroughOneStreamInRandomChunks() throws {
        var gen = RandomFrames(seed: 0x5EED_2026)
        var rng = SplitMix64(seed: 0xC4_0C4)
        for round in 0..<40 {
            var frames: [Frame] = []
            var stream: [UInt8] = []
            for _ in 0..<60 {
                let frame = gen.anyFrame()
                frames.append(frame)
                stream += Support.bytes(try frame.encoded())
            }
            var chunks: [ArraySlice<UInt8>] = []
            var i = 0
            while i < stream.count {
                let n = Int.random(in: 1...(Int.random(in: 0...1, using: &rng) == 0 ? 16 : 4_096), using: &rng)
                chunks.append(stream[i..<min(stream.count, i + n)])
                i += n
            }
            let decoded = try Support.decodeStream(chunks).get()
            #expect(decoded == frames, "round \(round)")
        }
    }

    /// Values past the limits: the encoder refuses them, or what it writes decodes to them.
    /// (The encoder checks the same limits as the decoder.)
    @Test(arguments: FrameType.allCases)
    func encoderAndDecoderAgreeOnLimits(_ type: FrameType) throws {
        var gen = RandomFrames(seed: 0x1111_0000 &+ UInt64(type.rawValue), wild: true)
        var refused = 0
        for i in 0..<150 {
            let frame = gen.frame(type)
            let bytes: ByteBuffer
            do { bytes = try frame.encoded() } catch {
                refused += 1
                continue
            }
            #expect(try Frame.decode(exactly: bytes) == frame, "case \(i)")
        }
        #expect(refused < 150)
        // Frames with strings, sets or parts go past a limit now and then.
        if [.sendMessage, .createConversation, .changeBatch, .addParticipants].contains(type) { #expect(refused > 0) }
    }

    @Test func typicalFrameSplitAtEveryPosition() throws {
        var gen = RandomFrames(seed: 7)
        for _ in 0..<20 {
            let frame = gen.frame(.sendMessage)
            let bytes = Support.bytes(try frame.encoded())
            for i in stride(from: 0, through: bytes.count, by: max(1, bytes.count / 97)) {
                #expect(try Support.decodeStream(Support.split(bytes, at: i)).get() == [frame])
            }
        }
    }
}
