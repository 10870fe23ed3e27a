import Foundation
import LaminaModel
import LaminaTransport
import LaminaWire
import Testing

@testable import LaminaNode
@testable import LaminaStore

/// Header validation and range parsing of the content resource (Protocol/CONTENT.md §3, §5).
@Suite struct ContentHeaderTests {
    static let digest = String(repeating: "aB", count: 32)

    @Test func validUploadHeaders() throws {
        let h = try UploadRequestHeaders([
            ("lamina-content-size", "1000"), ("lamina-content-sha256", Self.digest), ("lamina-upload-offset", "400"),
            ("content-length", "600"),
        ])
        #expect(h.size == 1000)
        #expect(h.sha256 == [UInt8](repeating: 0xAB, count: 32))
        #expect(h.offset == 400)
        #expect(h.contentLength == 600)
        let minimal = try UploadRequestHeaders([("lamina-content-size", "0"), ("lamina-content-sha256", Self.digest)])
        #expect(minimal.offset == 0)
        #expect(minimal.contentLength == nil)
        let largest = try UploadRequestHeaders([
            ("lamina-content-size", "\(1 << 31)"), ("lamina-content-sha256", Self.digest),
        ])
        #expect(largest.size == 1 << 31)
    }

    @Test func invalidUploadHeadersAreRefusedWithTheirCode() {
        let cases: [(HeaderFields, WireError.Code)] = [
            ([("lamina-content-sha256", Self.digest)], .invalidArgument),
            ([("lamina-content-size", "10")], .invalidArgument),
            ([("lamina-content-size", "ten"), ("lamina-content-sha256", Self.digest)], .invalidArgument),
            ([("lamina-content-size", "+10"), ("lamina-content-sha256", Self.digest)], .invalidArgument),
            (
                [("lamina-content-size", "99999999999999999999"), ("lamina-content-sha256", Self.digest)],
                .invalidArgument
            ),
            ([("lamina-content-size", "\((1 << 31) + 1)"), ("lamina-content-sha256", Self.digest)], .partTooLarge),
            (
                [("lamina-content-size", "10"), ("lamina-content-sha256", String(Self.digest.dropLast()))],
                .invalidArgument
            ),
            (
                [("lamina-content-size", "10"), ("lamina-content-sha256", String(Self.digest.dropLast(2)))],
                .invalidArgument
            ),
            (
                [("lamina-content-size", "10"), ("lamina-content-sha256", String(repeating: "g", count: 64))],
                .invalidArgument
            ),
            (
                [
                    ("lamina-content-size", "10"), ("lamina-content-sha256", Self.digest),
                    ("lamina-upload-offset", "11"),
                ], .invalidArgument
            ),
            (
                [
                    ("lamina-content-size", "10"), ("lamina-content-sha256", Self.digest),
                    ("lamina-upload-offset", "-1"),
                ], .invalidArgument
            ),
            (
                [
                    ("lamina-content-size", "10"), ("lamina-content-sha256", Self.digest),
                    ("lamina-upload-offset", "4"),
                    ("content-length", "7"),
                ], .uploadTooLong
            ),
        ]
        for (headers, code) in cases {
            #expect(
                performing: { try UploadRequestHeaders(headers) }, throws: { ($0 as? ContentFailure)?.code == code })
        }
    }

    @Test func failuresMapToTheirHTTPStatus() {
        let expected: [(WireError.Code, Int)] = [
            (.invalidArgument, 400), (.uploadTooLong, 400), (.authenticationRequired, 401), (.sessionExpired, 401),
            (.sessionRevoked, 401), (.forbidden, 403), (.contentNotFound, 404), (.uploadOffsetMismatch, 409),
            (.uploadMismatch, 409), (.contentNotReady, 409), (.partTooLarge, 413), (.contentDigestMismatch, 422),
            (.overloaded, 429), (.quotaExceeded, 507), (.internalError, 500), (.shuttingDown, 503),
        ]
        for (code, status) in expected { #expect(ContentFailure(code, "x").status == status, "\(code)") }
        #expect(ContentFailure.from(StorageError(.closed, "closing")).code == .shuttingDown)
        #expect(ContentFailure.from(StorageError(.database, "disk")).code == .internalError)
    }

    @Test func singleRanges() {
        let size: UInt64 = 1000
        let cases: [(String?, ByteRangeRequest)] = [
            (nil, .whole),
            ("bytes=0-99", .range(lower: 0, upper: 99)),
            ("bytes=100-", .range(lower: 100, upper: 999)),
            ("bytes=-100", .range(lower: 900, upper: 999)),
            ("bytes=-5000", .range(lower: 0, upper: 999)),
            ("bytes=990-5000", .range(lower: 990, upper: 999)),
            ("bytes=999-999", .range(lower: 999, upper: 999)),
            ("BYTES=5-6", .range(lower: 5, upper: 6)),
            ("bytes=1000-", .unsatisfiable),
            ("bytes=1000-2000", .unsatisfiable),
            ("bytes=-0", .unsatisfiable),
            // Ignored (the whole content): other units, several ranges, malformed, reversed.
            ("items=0-1", .whole),
            ("bytes=0-1,5-6", .whole),
            ("bytes=abc", .whole),
            ("bytes=5-1", .whole),
            ("bytes=x-5", .whole),
        ]
        for (header, expected) in cases {
            #expect(ByteRangeRequest(header: header, size: size) == expected, "\(header ?? "nil")")
        }
        #expect(ByteRangeRequest(header: "bytes=0-", size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest(header: "bytes=-1", size: 0) == .unsatisfiable)
        #expect(ByteRangeRequest(header: nil, size: 0) == .whole)
    }

    @Test func contentPaths() {
        let uuid = UUID()
        #expect(ContentHeaderParsing.contentID(path: "/v1/content/\(uuid.uuidString)")?.uuid == uuid)
        #expect(ContentHeaderParsing.contentID(path: "/v1/content/\(uuid.uuidString.lowercased())?x=1")?.uuid == uuid)
        #expect(ContentHeaderParsing.contentID(path: "/v1/content/") == nil)
        #expect(ContentHeaderParsing.contentID(path: "/v1/content/\(uuid.uuidString)/x") == nil)
        #expect(ContentHeaderParsing.contentID(path: "/v1/contents/\(uuid.uuidString)") == nil)
    }

    @Test func settingsAreValidatedAndReadFromJSON() throws {
        var configuration = NodeServerConfiguration()
        try configuration.validate()
        #expect(configuration.content.quotaBytes == 10 * 1024 * 1024 * 1024)
        #expect(configuration.content.maxConcurrentUploadsPerUser == 8)
        #expect(configuration.content.abandonedUploadAgeSeconds == 86_400)
        #expect(configuration.content.unreferencedContentAgeSeconds == 86_400)
        #expect(configuration.content.sweepIntervalSeconds == 600)
        let data = URL(fileURLWithPath: "/srv/node-a")
        #expect(configuration.content.directory == nil)
        #expect(configuration.content.root(dataDirectory: data).path == "/srv/node-a/content")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "content-config-\(UUID().uuidString).json")
        try Data(
            #"{"content": {"directory": "/srv/lamina-content", "quotaBytes": 5000, "maxConcurrentUploadsPerUser": 2, "sweepIntervalSeconds": 60}}"#
                .utf8
        ).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        try configuration.apply(configFile: file.path)
        #expect(configuration.content.quotaBytes == 5000)
        #expect(configuration.content.maxConcurrentUploadsPerUser == 2)
        #expect(configuration.content.sweepIntervalSeconds == 60)
        #expect(configuration.content.root(dataDirectory: data).path == "/srv/lamina-content")
        configuration.content.directory = ""
        #expect(throws: NodeServerError.self) { try configuration.validate() }
        configuration.content.directory = nil
        configuration.content.maxConcurrentUploadsPerUser = 0
        #expect(throws: NodeServerError.self) { try configuration.validate() }
    }
}
