import Foundation
import LaminaNode
import LaminaProcess

/// Runs an external program to its end on a plain thread; stdout and stderr as text.
enum ExternalCommand {
    struct Result: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ executable: String, _ arguments: [String], stdin: String? = nil) async throws -> Result {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try? input.fileHandleForWriting.close()
        }
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let group = DispatchGroup()
                nonisolated(unsafe) var errData = Data()
                group.enter()
                Thread.detachNewThread {
                    errData = PipeReading.toEnd(err.fileHandleForReading)
                    group.leave()
                }
                let outData = PipeReading.toEnd(out.fileHandleForReading)
                group.wait()
                process.waitUntilExit()
                continuation.resume(
                    returning: Result(
                        status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                        stderr: String(decoding: errData, as: UTF8.self)))
            }
        }
    }
}

/// curl against a node's Server API, over HTTP/1.1 or HTTP/2, trusting the node's certificate.
struct CurlAPI: Sendable {
    enum HTTP: String, Sendable {
        case http1 = "--http1.1"
        case http2 = "--http2"
    }

    struct Response: Sendable {
        var status: Int
        /// As curl reports it: "1.1" or "2".
        var httpVersion: String
        var body: String
        var headers: [String: String]
        var json: Any? { try? JSONSerialization.jsonObject(with: Data(body.utf8), options: [.fragmentsAllowed]) }
        var object: [String: Any] { json as? [String: Any] ?? [:] }
        var array: [[String: Any]] { json as? [[String: Any]] ?? [] }
    }

    let url: String
    let caFile: String
    let appID: String
    let token: String
    var http: HTTP = .http1
    var version = "3.0"

    init(url: String, caFile: String, appID: String, token: String) {
        self.url = url
        self.caFile = caFile
        self.appID = appID
        self.token = token
    }

    /// Headers of a request to the webhooks API (its own media type).
    var webhookHeaders: [String: String] {
        ["Authorization": "Bearer \(token)", "Accept": "application/vnd.layer.webhooks+json; version=3.0"]
    }

    init(_ server: NodeServer, http: HTTP = .http1, version: String = "3.0", token: String? = nil) {
        url = server.url
        caFile = server.prepared.certificatePath
        appID = server.serverAPICredentials!.appID
        self.token = token ?? ServerAPITestTokens.first(of: server)
        self.http = http
        self.version = version
    }

    /// `path` below `/apps/<app id>` (or absolute when it starts with `//`).
    func request(
        _ method: String, _ path: String, json: String? = nil, headers: [String: String]? = nil,
        contentType: String = "application/json", bodyFile: String? = nil
    ) async throws -> Response {
        let target = path.hasPrefix("//") ? url + path.dropFirst() : "\(url)/apps/\(appID)\(path)"
        var arguments = [
            "-sS", http.rawValue, "--cacert", caFile, "-X", method, "-D", "-", "-o", "-",
            "-w", "\n@@%{http_code} %{http_version}",
        ]
        let defaults = ["Authorization": "Bearer \(token)", "Accept": "application/vnd.layer+json; version=\(version)"]
        for (name, value) in (headers ?? defaults) { arguments += ["-H", "\(name): \(value)"] }
        if json != nil {
            arguments += ["-H", "Content-Type: \(contentType)", "--data-binary", "@-"]
        } else if let bodyFile {
            arguments += ["-H", "Content-Type: \(contentType)", "--data-binary", "@\(bodyFile)"]
        }
        arguments.append(target)
        let result = try await ExternalCommand.run("/usr/bin/curl", arguments, stdin: json)
        guard result.status == 0, let marker = result.stdout.range(of: "\n@@", options: .backwards) else {
            throw CurlFailed(
                description: "curl \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
        let tail = result.stdout[marker.upperBound...].split(separator: " ")
        var full = String(result.stdout[..<marker.lowerBound])
        while full.hasPrefix("HTTP/1.1 100"), let end = full.range(of: "\r\n\r\n") {
            full = String(full[end.upperBound...])
        }
        // Headers, a blank line, then the body.
        let split = full.range(of: "\r\n\r\n")
        let headerText = split.map { String(full[..<$0.lowerBound]) } ?? full
        let body = split.map { String(full[$0.upperBound...]) } ?? ""
        var headers: [String: String] = [:]
        for line in headerText.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return Response(status: Int(tail[0]) ?? 0, httpVersion: String(tail[1]), body: body, headers: headers)
    }
}

struct CurlFailed: Error, CustomStringConvertible { var description: String }

/// The Server API token a test node created at its first start.
enum ServerAPITestTokens {
    static func first(of server: NodeServer) -> String {
        let file = server.prepared.dataDirectory.appendingPathComponent("server-api/tokens")
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init).first { !$0.hasPrefix("#") && !$0.isEmpty } ?? ""
    }
}
