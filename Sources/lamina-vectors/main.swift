import Foundation
import LaminaWire
import NIOCore

// Writes Protocol/vectors/{valid,invalid,skipped}/*.json from Catalog.swift, Invalid.swift and Skipped.swift,
// checking each against the codec first. Usage: swift run lamina-vectors [Protocol/vectors]

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

let root = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "Protocol/vectors"
let fm = FileManager.default
var failures = 0

precondition(hundredBytes.utf8.count == 100, "the typical text is \(hundredBytes.utf8.count) bytes, not 100")

for dir in ["valid", "invalid", "skipped"] {
    let path = "\(root)/\(dir)"
    try? fm.removeItem(atPath: path)
    try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
}

var seenTypes = Set<FrameType>()
for v in validVectors + threadValidVectors {
    let bytes = B.encoded(v.frame)
    let decoded = try Frame.decode(exactly: ByteBuffer(bytes: bytes))
    if decoded != v.frame {
        print("valid/\(v.name): decodes to a different frame")
        failures += 1
    }
    seenTypes.insert(v.frame.type)
    let json = WireJSON.object([
        "name": .string(v.name), "description": .string(v.description), "hex": .string(hex(bytes)),
        "value": v.frame.readableJSON,
    ])
    try (json.serialized() + "\n").write(toFile: "\(root)/valid/\(v.name).json", atomically: true, encoding: .utf8)
}
for type in FrameType.allCases where !seenTypes.contains(type) {
    print("no valid vector for \(type.name)")
    failures += 1
}

for v in invalidVectors + threadInvalidVectors {
    do {
        let frame = try Frame.decode(exactly: ByteBuffer(bytes: v.bytes))
        print("invalid/\(v.name): decoded to \(frame)")
        failures += 1
    } catch {
        if error.code != v.error {
            print("invalid/\(v.name): fails with \(error.code.name) (\(error.reason)), expected \(v.error.name)")
            failures += 1
        }
    }
    let json = WireJSON.object([
        "name": .string(v.name), "description": .string(v.description), "hex": .string(hex(v.bytes)),
        "error": .string(v.error.name),
    ])
    try (json.serialized() + "\n").write(toFile: "\(root)/invalid/\(v.name).json", atomically: true, encoding: .utf8)
}

for v in skippedVectors {
    var decoder = FrameDecoder()
    decoder.feed(ByteBuffer(bytes: v.bytes))
    var frames: [Frame] = []
    do {
        while let frame = try decoder.next() { frames.append(frame) }
        try decoder.finish()
        if frames != v.frames {
            print("skipped/\(v.name): decodes to \(frames)")
            failures += 1
        }
    } catch {
        print("skipped/\(v.name): fails with \(error.code.name) (\(error.reason))")
        failures += 1
    }
    let json = WireJSON.object([
        "name": .string(v.name), "description": .string(v.description), "hex": .string(hex(v.bytes)),
        "frames": .array(v.frames.map(\.readableJSON)),
    ])
    try (json.serialized() + "\n").write(toFile: "\(root)/skipped/\(v.name).json", atomically: true, encoding: .utf8)
}

print(
    "\(validVectors.count + threadValidVectors.count) valid, \(invalidVectors.count + threadInvalidVectors.count) invalid and \(skippedVectors.count) skipped vectors written to \(root); \(failures) problems"
)
exit(failures == 0 ? 0 : 1)
