import Foundation
import LaminaModel
import LaminaTransport
import Logging
import NIOConcurrencyHelpers

/// The app id and the Server API tokens of this node, kept in the data directory
/// (`server-api/app-id`, and `server-api/tokens`: one token a line, `#` comments; delete a
/// line to revoke it, add lines for more tokens; re-read when the file changes, see
/// ``ServerAPITokenSource``). The first start creates both. Tokens are compared in constant
/// time and never logged.
public struct ServerAPICredentials: Sendable {
    /// The app id in paths (`/apps/<appID>/…`): a UUID.
    public var appID: String
    /// The accepted bearer tokens.
    var tokens: [[UInt8]]
    /// Whether the first token was made now (the node then prints it).
    public var created: Bool
    /// The first token, for printing at a first start (nil otherwise).
    public var newToken: String?
    /// The tokens file, when the tokens came from one.
    public var tokensFile: URL?
    /// On a shared store: the SHA-256 of every node's tokens (``SharedServerAPICredentials``).
    var sharedHashes: [[UInt8]] = []

    enum Files {
        static let directory = "server-api"
        static let appID = "server-api/app-id"
        static let tokens = "server-api/tokens"
    }

    /// Reads the app id and tokens under `dataDirectory`, creating them when missing.
    public static func loadOrCreate(in dataDirectory: URL) throws -> ServerAPICredentials {
        let fm = FileManager.default
        try fm.createDirectory(
            at: dataDirectory.appendingPathComponent(Files.directory), withIntermediateDirectories: true)
        let appURL = dataDirectory.appendingPathComponent(Files.appID)
        let tokensURL = dataDirectory.appendingPathComponent(Files.tokens)
        var appID =
            (try? String(contentsOf: appURL, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        if appID.isEmpty {
            appID = UUID().uuidString.lowercased()
            try Data((appID + "\n").utf8).write(to: appURL, options: .atomic)
        }
        var created = false
        var newToken: String?
        if !fm.fileExists(atPath: tokensURL.path) {
            let token = randomToken()
            let text = "# Server API bearer tokens, one a line. Delete a line to revoke it.\n\(token)\n"
            try Data(text.utf8).write(to: tokensURL, options: .atomic)
            _ = chmod(tokensURL.path, 0o600)
            created = true
            newToken = token
        }
        var credentials = ServerAPICredentials(
            appID: appID, tokens: try tokens(in: tokensURL), created: created, newToken: newToken)
        credentials.tokensFile = tokensURL
        return credentials
    }

    /// The tokens of a tokens file (one a line, `#` comments, blank lines ignored).
    static func tokens(in file: URL) throws -> [[UInt8]] {
        try String(contentsOf: file, encoding: .utf8).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            .map { Array($0.utf8) }
    }

    /// A credentials value for tests and embedding.
    public init(appID: String, tokens: [String]) {
        self.init(appID: appID, tokens: tokens.map { Array($0.utf8) }, created: false, newToken: nil)
    }

    init(appID: String, tokens: [[UInt8]], created: Bool, newToken: String?) {
        self.appID = appID
        self.tokens = tokens
        self.created = created
        self.newToken = newToken
    }

    /// 32 random bytes, base64url.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Base64URL.encode(bytes)
    }

    /// The index of the token `presented` equals, if any. Every token is compared in full
    /// (time depends on the lengths only, not on where bytes differ). On a shared store a
    /// token of another node matches by its SHA-256 (indexes after this node's tokens).
    func match(_ presented: String) -> Int? {
        let candidate = Array(presented.utf8)
        var found: Int? = nil
        for (index, token) in tokens.enumerated() {
            var difference = UInt8(token.count == candidate.count ? 0 : 1)
            for i in 0..<token.count {
                difference |= token[i] ^ (i < candidate.count ? candidate[i] : 0)
            }
            if difference == 0 && found == nil { found = index }
        }
        if found == nil, !sharedHashes.isEmpty, let hash = try? SHA256Hasher.hash(candidate) {
            for (index, shared) in sharedHashes.enumerated() {
                var difference: UInt8 = 0
                for i in 0..<32 { difference |= shared[i] ^ hash[i] }
                if difference == 0 && found == nil { found = tokens.count + index }
            }
        }
        return found
    }
}

/// The credentials in use: the tokens file is looked at again at most once a second and
/// re-read when its modification time changed, so a token added or deleted there takes
/// effect without a restart. A file that cannot be read keeps the tokens read last (logged).
final class ServerAPITokenSource: Sendable {
    static let checkInterval: Duration = .seconds(1)
    private let state:
        NIOLockedValueBox<(credentials: ServerAPICredentials, modified: Date?, checked: ContinuousClock.Instant)>
    private let logger = Logger(label: "lamina.server-api")

    /// Other nodes' tokens on a shared store.
    private let shared: SharedServerAPICredentials?

    init(_ credentials: ServerAPICredentials, shared: SharedServerAPICredentials? = nil) {
        let modified = credentials.tokensFile.flatMap(Self.modified)
        state = NIOLockedValueBox((credentials, modified, .now))
        self.shared = shared
    }

    static func modified(_ file: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: file.path))?[.modificationDate] as? Date
    }

    var current: ServerAPICredentials {
        var credentials = fromFile
        if let shared { credentials.sharedHashes = shared.hashes.withLockedValue { $0 } }
        return credentials
    }

    private var fromFile: ServerAPICredentials {
        state.withLockedValue { s in
            guard let file = s.credentials.tokensFile, ContinuousClock.now - s.checked >= Self.checkInterval else {
                return s.credentials
            }
            s.checked = .now
            let modified = Self.modified(file)
            guard modified != s.modified else { return s.credentials }
            s.modified = modified
            do {
                s.credentials.tokens = try ServerAPICredentials.tokens(in: file)
                logger.info("Server API tokens re-read", metadata: ["tokens": "\(s.credentials.tokens.count)"])
            } catch {
                logger.error(
                    "cannot re-read the Server API tokens; keeping the previous ones", metadata: ["error": "\(error)"])
            }
            return s.credentials
        }
    }
}
