import Foundation

/// Renders the codec benchmark's rows as a plain-text table.
struct CodecReport {
    var rows: [CodecRow]
    var settings: MeasureSettings
    var allocationSamples: Int
    var streamFrames: Int

    func render() -> String {
        var lines: [String] = []
        let header = [
            pad("case", 26), pad("operation", 28), lpad("bytes L/PB", 11),
            lpad("Lamina frames/s", 16), lpad("MB/s", 8), lpad("allocs", 7),
            lpad("protobuf frames/s", 18), lpad("MB/s", 8), lpad("allocs", 7), lpad("L/PB", 6),
        ].joined(separator: " ")
        lines.append(header)
        lines.append(String(repeating: "-", count: header.count))
        for row in rows {
            let lamina = row.lamina.perSecond
            let pb = row.protobuf?.perSecond
            lines.append(
                [
                    pad(row.caseName, 26), pad(row.operation, 28), lpad("\(row.laminaBytes)/\(row.protobufBytes)", 11),
                    lpad(rate(lamina), 16), lpad(megabytes(lamina, row.laminaBytes), 8),
                    lpad(allocations(row.laminaAllocations), 7),
                    lpad(pb.map(rate) ?? "-", 18), lpad(pb.map { megabytes($0, row.protobufBytes) } ?? "-", 8),
                    lpad(allocations(row.protobufAllocations), 7),
                    lpad(pb.map { String(format: "%.2fx", lamina / $0) } ?? "-", 6),
                ].joined(separator: " "))
        }
        lines.append("")
        lines.append(
            "frames/s: median of \(settings.rounds) rounds of ~\(ms(settings.roundDuration)) ms after \(ms(settings.warmUp)) ms warm-up; Lamina's and protobuf's"
        )
        lines.append("rounds alternate, so both see the same machine load. Spread (slowest..fastest round):")
        for row in rows {
            var spread =
                "  \(row.caseName), \(row.operation): Lamina \(rate(row.lamina.slowest))..\(rate(row.lamina.fastest))"
            if let pb = row.protobuf { spread += ", protobuf \(rate(pb.slowest))..\(rate(pb.fastest))" }
            lines.append(spread)
        }
        lines.append(
            "MB/s: frames/s x each format's own encoded size (bytes L/PB; Lamina's includes its 8-byte frame header), 1 MB = 10^6 bytes."
        )
        if AllocationCounter.isAvailable {
            lines.append(
                "allocs: heap allocations (malloc, calloc, realloc, aligned) per frame, counted over \(allocationSamples * 16) operations"
            )
            lines.append(
                "        (FrameDecoder stream: per frame over streams of \(streamFrames) frames, the stream's buffer built beforehand)."
            )
        } else {
            lines.append("allocs: not counted on this platform (needs Linux with glibc).")
        }
        lines.append("L/PB: Lamina frames/s divided by protobuf frames/s (above 1: Lamina is faster).")
        lines.append(
            "protobuf decodes into its generated structs (Data, String, arrays); Lamina into the LaminaModel values (UUID, UserID, MIMEType, [UInt8])."
        )
        lines.append("(c) is one frame holding 100 changes: changes/s = 100 x frames/s.")
        return lines.joined(separator: "\n")
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
    }
    private func lpad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
    }
    private func ms(_ d: Duration) -> String { String(format: "%.0f", d.seconds * 1_000) }

    private func rate(_ perSecond: Double) -> String {
        // Thousands separators, no fractional part.
        let digits = String(Int(perSecond.rounded()))
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    private func megabytes(_ perSecond: Double, _ bytes: Int) -> String {
        String(format: "%.1f", perSecond * Double(bytes) / 1e6)
    }
    private func allocations(_ value: Double?) -> String {
        guard AllocationCounter.isAvailable, let value else { return "-" }
        return String(format: "%.2f", value)
    }
}
