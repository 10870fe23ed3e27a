import ArgumentParser
import Foundation
import LaminaModel
import LaminaWire
import NIOCore
import SwiftProtobuf

/// `lamina-bench codec`: encode and decode rates of typical frames, with swift-protobuf
/// encoding and decoding the equivalent schema (bench.proto) in the same run, and heap
/// allocations per frame. Run it in release: `swift run -c release lamina-bench codec`.
struct CodecBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codec",
        abstract: "Codec throughput and allocations, side by side with swift-protobuf."
    )

    @Option(help: "Timed rounds per measurement (the median round is reported).")
    var rounds = 21

    @Option(name: .customLong("round-ms"), help: "Approximate duration of one round, in milliseconds.")
    var roundMilliseconds = 50

    @Option(name: .customLong("warmup-ms"), help: "Warm-up before each measurement, in milliseconds.")
    var warmUpMilliseconds = 300

    @Option(help: "Frames per stream in the FrameDecoder (streaming) measurement.")
    var streamFrames = 1_000

    @Option(help: "Operations per allocation count.")
    var allocationSamples = 1_000

    func validate() throws {
        guard rounds >= 1, roundMilliseconds >= 1, warmUpMilliseconds >= 0, streamFrames >= 1, allocationSamples >= 1
        else {
            throw ValidationError(
                "rounds, round-ms, stream-frames and allocation-samples must be at least 1, warmup-ms at least 0")
        }
    }

    func run() throws {
        let settings = MeasureSettings(
            warmUp: .milliseconds(warmUpMilliseconds),
            roundDuration: .milliseconds(roundMilliseconds),
            rounds: rounds
        )
        #if DEBUG
            print("WARNING: this is a debug build; measure with `swift run -c release lamina-bench codec`.\n")
        #endif
        var runner = CodecRunner(settings: settings, streamFrames: streamFrames, allocationSamples: allocationSamples)
        let one = CodecFixtures.onePartMessage()
        try runner.run("(a) 1-part 100 B message", frame: .sendMessage(one), message: CodecFixtures.protobuf(one))
        let ten = CodecFixtures.tenPartMessage()
        try runner.run("(b) 10-part message", frame: .sendMessage(ten), message: CodecFixtures.protobuf(ten))
        let batch = CodecFixtures.changeBatch()
        try runner.run("(c) batch of 100 changes", frame: .changeBatch(batch), message: CodecFixtures.protobuf(batch))
        print(
            CodecReport(
                rows: runner.rows, settings: settings, allocationSamples: allocationSamples, streamFrames: streamFrames
            ).render())
    }
}

/// One line of the report: one operation on one case, Lamina and (where it exists) protobuf.
struct CodecRow {
    var caseName: String
    var operation: String
    var laminaBytes: Int
    var protobufBytes: Int
    var lamina: Throughput
    var protobuf: Throughput?
    var laminaAllocations: Double?
    var protobufAllocations: Double?
}

/// Runs the measurements of each case and collects the rows.
struct CodecRunner {
    var settings: MeasureSettings
    var streamFrames: Int
    var allocationSamples: Int
    var rows: [CodecRow] = []

    /// Operations per timed call; keeps clock reads out of the per-operation cost.
    let batch = 16

    mutating func run<M: SwiftProtobuf.Message & Equatable>(_ name: String, frame: Frame, message: M) throws {
        // The two encodings, and a check that each decodes back to what was encoded.
        let laminaBytes = try frame.encoded()
        guard try Frame.decode(exactly: laminaBytes) == frame else {
            throw CleanExit.message("\(name): Lamina round trip differs")
        }
        let protobufBytes: [UInt8] = try message.serializedBytes()
        guard try M(serializedBytes: protobufBytes) == message else {
            throw CleanExit.message("\(name): protobuf round trip differs")
        }
        let batch = self.batch
        let samples = allocationSamples

        // Encode into a new buffer per frame (as protobuf's serializedBytes does).
        let laminaEncode = {
            for _ in 0..<batch {
                do { blackHole(try frame.encoded()) } catch { fatalError("encode failed: \(error)") }
            }
        }
        let protobufEncode = {
            for _ in 0..<batch {
                do { blackHole(try message.serializedBytes() as [UInt8]) } catch {
                    fatalError("encode failed: \(error)")
                }
            }
        }
        let encodeRates = measure(settings, batch: batch, [laminaEncode, protobufEncode])
        rows.append(
            CodecRow(
                caseName: name, operation: "encode", laminaBytes: laminaBytes.readableBytes,
                protobufBytes: protobufBytes.count,
                lamina: encodeRates[0],
                protobuf: encodeRates[1],
                laminaAllocations: AllocationCounter.allocations(per: samples * batch) {
                    for _ in 0..<samples { laminaEncode() }
                },
                protobufAllocations: AllocationCounter.allocations(per: samples * batch) {
                    for _ in 0..<samples { protobufEncode() }
                }
            ))

        // Encode into one reused buffer (what a channel handler does); Lamina only.
        var reused = ByteBufferAllocator().buffer(capacity: laminaBytes.readableBytes)
        let laminaEncodeReused = {
            for _ in 0..<batch {
                reused.clear()
                do { try frame.encode(into: &reused) } catch { fatalError("encode failed: \(error)") }
                blackHole(reused.writerIndex)
            }
        }
        rows.append(
            CodecRow(
                caseName: name, operation: "encode, reused buffer", laminaBytes: laminaBytes.readableBytes,
                protobufBytes: protobufBytes.count,
                lamina: measure(settings, batch: batch, laminaEncodeReused),
                laminaAllocations: AllocationCounter.allocations(per: samples * batch) {
                    for _ in 0..<samples { laminaEncodeReused() }
                }
            ))

        // Decode one whole frame / one message from its bytes.
        let laminaDecode = {
            for _ in 0..<batch {
                do { blackHole(try Frame.decode(exactly: laminaBytes)) } catch { fatalError("decode failed: \(error)") }
            }
        }
        let protobufDecode = {
            for _ in 0..<batch {
                do { blackHole(try M(serializedBytes: protobufBytes)) } catch { fatalError("decode failed: \(error)") }
            }
        }
        let decodeRates = measure(settings, batch: batch, [laminaDecode, protobufDecode])
        rows.append(
            CodecRow(
                caseName: name, operation: "decode", laminaBytes: laminaBytes.readableBytes,
                protobufBytes: protobufBytes.count,
                lamina: decodeRates[0],
                protobuf: decodeRates[1],
                laminaAllocations: AllocationCounter.allocations(per: samples * batch) {
                    for _ in 0..<samples { laminaDecode() }
                },
                protobufAllocations: AllocationCounter.allocations(per: samples * batch) {
                    for _ in 0..<samples { protobufDecode() }
                }
            ))

        // Decode a stream of frames with the incremental FrameDecoder; Lamina only.
        var stream = ByteBufferAllocator().buffer(capacity: laminaBytes.readableBytes * streamFrames)
        for _ in 0..<streamFrames { stream.writeImmutableBuffer(laminaBytes) }
        let frames = streamFrames
        let laminaStream = {
            var decoder = FrameDecoder()
            decoder.feed(stream)
            var count = 0
            do {
                while let frame = try decoder.next() {
                    blackHole(frame)
                    count += 1
                }
            } catch {
                fatalError("stream decode failed: \(error)")
            }
            precondition(count == frames, "the stream held \(frames) frames, \(count) came out")
        }
        let streamSamples = max(1, samples * batch / frames)
        rows.append(
            CodecRow(
                caseName: name, operation: "decode, FrameDecoder stream", laminaBytes: laminaBytes.readableBytes,
                protobufBytes: protobufBytes.count,
                lamina: measure(settings, batch: frames, laminaStream),
                laminaAllocations: AllocationCounter.allocations(per: streamSamples * frames) {
                    for _ in 0..<streamSamples { laminaStream() }
                }
            ))
    }
}
