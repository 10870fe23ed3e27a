import Foundation
import LaminaModel
import LaminaStore
import LaminaTransport
import LaminaWire
import NIOConcurrencyHelpers

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

extension Timestamp {
    func adding(_ duration: Duration) -> Timestamp {
        Timestamp(millisecondsSince1970: millisecondsSince1970 + duration.milliseconds)
    }
}

extension NodeSession {
    /// NONCE_REQUEST (`requestID`), or after an authentication failure (nil: unasked): a fresh
    /// nonce tied to this stream's connection (``NonceTable``). The stream's bound counts its
    /// open nonces (SPEC §5.2: issued, not used, not expired): past it a request ends the
    /// stream with a fatal `limit-exceeded` and an unasked nonce is not sent; past the
    /// connection's or the node's the answer is `overloaded` with a retry delay. Called from
    /// the session's inbox only (one at a time).
    func issueNonce(requestID: UUID?) {
        let limit = engine.nonces.limits.perStream
        let open = state.withLockedValue { $0.nonces }.filter { engine.nonces.isOpen($0) }
        state.withLockedValue { $0.nonces = open }
        guard open.count < limit else {
            guard requestID != nil else { return }
            return fail(WireError(.limitExceeded, "a stream may hold at most \(limit) open nonces"))
        }
        switch engine.nonces.issue(to: connection) {
        case .success(let issued):
            state.withLockedValue { $0.nonces.append(issued.nonce) }
            let id = requestID ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
            send(.nonce(Nonce(requestID: id, nonce: issued.nonce, expiresAt: issued.expiresAt)))
        case .failure(let error):
            var frame = ErrorFrame(error, requestID: requestID)
            frame.isFatal = false
            frame.retryAfterMilliseconds = engine.nonces.limits.refusalRetryAfterMilliseconds
            send(.error(frame))
        }
    }

    /// AUTHENTICATE: verifies the identity token, uses its nonce (one of this connection's,
    /// ``NonceTable``), creates the session, then answers AUTHENTICATED; on failure ERROR with
    /// the specific code, followed by a fresh NONCE. A failed login uses its nonce up too.
    func authenticate(_ request: Authenticate) async {
        guard state.withLockedValue({ $0.auth == nil }) else {
            return fail(WireError(.unexpectedFrame, "the session is already authenticated"))
        }
        let now = Timestamp.now()
        let device = request.deviceID.uuidString.lowercased()
        do {
            let claims = try engine.verifier.verify(request.identityToken, now: now)
            try await engine.checkNotSuspended(claims.identity.userID)
            let (token, hash) = try Self.makeSessionToken()
            let record = SessionRecord(
                tokenHash: hash, user: claims.identity.userID, device: device, createdAt: now,
                expiresAt: now.adding(engine.configuration.sessionLifetime))
            try engine.nonces.use(claims.nonce, by: connection, now: now)
            try await engine.store.write { tx in try tx.createSession(record) }
            authenticated(Auth(user: record.user, device: device, tokenHash: hash))
            expire(hash, at: record.expiresAt)
            send(
                .authenticated(
                    Authenticated(
                        requestID: request.requestID, sessionToken: token, identity: claims.identity,
                        expiresAt: record.expiresAt)))
        } catch {
            if let nonce = IdentityTokenVerifier.unverifiedNonce(request.identityToken) {
                engine.nonces.spoil(nonce, by: connection)
            }
            if let storage = error as? StorageError, Self.storeCannotWrite(storage) {
                // A full disk (or a store that is down): the one write a login needs failed. A
                // clear, retryable answer (and a fresh NONCE below); the next login passes the
                // moment the store writes again, and RESUME_SESSION (a read) works meanwhile.
                var frame = ErrorFrame(
                    WireError(
                        .overloaded,
                        "the node cannot store a new session now (its store refuses writes: \(storage.reason)); "
                            + "log in again after the delay, or resume an existing session"),
                    requestID: request.requestID)
                frame.isFatal = false
                frame.retryAfterMilliseconds = Self.storeCannotWriteRetryMilliseconds
                send(.error(frame))
            } else {
                reply(EngineErrors.wire(error), requestID: request.requestID)
            }
            issueNonce(requestID: nil)
        }
    }

    /// The wait a login refused for a store that cannot write asks for (a full disk is not
    /// freed in milliseconds; the usual `overloaded` wait is 100 ms).
    static let storeCannotWriteRetryMilliseconds: UInt32 = 1_000

    /// Whether `error` says the store cannot write now (disk full, I/O, a database that is
    /// down or busy) rather than something about the request.
    static func storeCannotWrite(_ error: StorageError) -> Bool {
        [.database, .commitFailed, .writeQueueFull, .databaseUnavailable, .writeConflict].contains(error.code)
    }

    /// RESUME_SESSION: a live session token of the same device authenticates this stream.
    /// Expired, revoked or unknown tokens get their error (not fatal here) and a fresh NONCE.
    func resume(_ request: ResumeSession) async {
        guard state.withLockedValue({ $0.auth == nil }) else {
            return fail(WireError(.unexpectedFrame, "the session is already authenticated"))
        }
        let device = request.deviceID.uuidString.lowercased()
        let now = Timestamp.now()
        do {
            guard request.sessionToken.utf8.count <= IdentityTokenVerifier.maxTokenBytes else {
                throw WireError(.sessionExpired, "no session has this token")
            }
            let hash = try SHA256Hasher.hash(Array(request.sessionToken.utf8))
            let record = try await engine.store.read { r in try r.session(tokenHash: hash, at: now) }
            guard record.device == device else {
                throw WireError(.forbidden, "the session token belongs to another device")
            }
            authenticated(Auth(user: record.user, device: device, tokenHash: hash))
            expire(hash, at: record.expiresAt)
            send(
                .authenticated(
                    Authenticated(
                        requestID: request.requestID, sessionToken: request.sessionToken,
                        identity: Identity(userID: record.user), expiresAt: record.expiresAt)))
        } catch {
            var wire = EngineErrors.wire(error)
            if let storage = error as? StorageError, storage.code == .sessionUnknown {
                wire = WireError(.sessionExpired, "no live session has this token")
            }
            var frame = ErrorFrame(wire, requestID: request.requestID)
            frame.isFatal = false  // the client re-authenticates on this stream with the nonce that follows
            send(.error(frame))
            issueNonce(requestID: nil)
        }
    }

    /// END_SESSION (SPEC §5.8): once the commands before it are answered, revokes this
    /// stream's session durably, answers ACK and ends the stream; the session's other streams
    /// end with a fatal `session-revoked`.
    func endSession(_ request: EndSession, as auth: Auth) async {
        do {
            _ = try await engine.store.write { [engine] tx in
                // The device signs out: it gets no pushes from now on (from no node).
                try tx.setPushToken(nil, user: auth.user, device: auth.device, at: .now())
                try engine.recordPushRegistration(of: auth, in: tx)
                return try tx.revokeSession(tokenHash: auth.tokenHash, at: .now())
            }
        } catch {
            return reply(EngineErrors.wire(error), requestID: request.requestID)
        }
        engine.replicationSignal.notify()
        send(.ack(Ack(requestID: request.requestID)))
        close(with: nil)
        engine.endStreams(ofSession: auth.tokenHash, reason: "the session was ended by one of its streams")
    }

    /// REGISTER_PUSH_TOKEN (SPEC §5.9): once the commands before it are answered, stores (or
    /// removes) the device's push token and answers ACK; a token of the wrong size, or of a
    /// provider the node does not deliver to, is refused with `invalid-push-token`.
    func registerPushToken(_ request: RegisterPushToken, as auth: Auth) async {
        if let token = request.token {
            do { try token.validate() } catch { return reply(WireError(error), requestID: request.requestID) }
            guard engine.pushes.delivers(token.kind) else {
                return reply(
                    WireError(.invalidPushToken, "this node does not deliver \(token.kind.name) pushes"),
                    requestID: request.requestID)
            }
        }
        do {
            try await engine.store.write { [engine] tx in
                try tx.setPushToken(request.token, user: auth.user, device: auth.device, at: .now())
                try engine.recordPushRegistration(of: auth, in: tx)
            }
        } catch {
            return reply(EngineErrors.wire(error), requestID: request.requestID)
        }
        engine.replicationSignal.notify()
        send(.ack(Ack(requestID: request.requestID)))
    }

    private func authenticated(_ auth: Auth) {
        let previous = state.withLockedValue { s -> Auth? in
            defer { s.auth = auth }
            return s.auth
        }
        engine.registry.authenticated(self, as: auth.user)
        engine.deviceLive(auth.user, device: auth.device)
        if let previous, previous.user != auth.user || previous.device != auth.device {
            engine.deviceGone(previous.user, device: previous.device)
        }
        // A session that authenticates again as the same device is still one session here.
        if previous?.user != auth.user || previous?.device != auth.device {
            if let previous { engine.presenceSessionEnded(previous.user, device: previous.device) }
            engine.presenceSessionStarted(self, as: auth)
        }
    }

    /// 32 random bytes as base64url, and the SHA-256 of that text (what storage keeps).
    static func makeSessionToken() throws -> (token: String, hash: [UInt8]) {
        let token = Base64URL.encode(try SecureRandom.bytes(32))
        return (token, try SHA256Hasher.hash(Array(token.utf8)))
    }
}

extension NodeEngine {
    /// Revokes the session with this token; the node's sessions using it end with a fatal
    /// `session-revoked`. Returns whether a live session was revoked.
    @discardableResult
    public func revokeSession(token: String) async throws -> Bool {
        let hash = try SHA256Hasher.hash(Array(token.utf8))
        let revoked = try await store.write { tx in try tx.revokeSession(tokenHash: hash, at: .now()) }
        endStreams(ofSession: hash, reason: "the session was revoked")
        return revoked
    }

    /// Ends every open stream authenticated with the session whose token hashes to `hash`,
    /// with a fatal `session-revoked`.
    func endStreams(ofSession hash: [UInt8], reason: String) {
        for session in registry.all() where session.state.withLockedValue({ $0.auth?.tokenHash == hash }) {
            session.fail(WireError(.sessionRevoked, reason))
        }
    }

    /// Revokes every session of `user`; its live sessions end with a fatal `session-revoked`.
    /// Returns how many sessions were revoked.
    @discardableResult
    public func revokeSessions(of user: UserID) async throws -> Int {
        let revoked = try await store.write { [self] tx -> Int in
            let revoked = try tx.revokeSessions(of: user, at: .now())
            // Every node revokes the sessions it authenticated before this (SPEC §6.5).
            try recordUserState(.sessionsRevoked(user), in: tx)
            return revoked
        }
        replicationSignal.notify()
        for session in registry.all() where session.state.withLockedValue({ $0.auth?.user == user }) {
            session.fail(WireError(.sessionRevoked, "every session of the user was revoked"))
        }
        return revoked
    }
}

/// Maps failures to wire errors.
enum EngineErrors {
    static func wire(_ error: any Error) -> WireError {
        switch error {
        case let e as WireError: return e
        case let e as ModelError: return WireError(e)
        case let e as StorageError: return wire(e)
        default: return WireError(.internalError, "\(error)")
        }
    }

    static func wire(_ e: StorageError) -> WireError {
        let code: WireError.Code
        switch e.code {
        case .nonceUnknown: code = .unknownNonce
        case .nonceReused: code = .nonceReused
        case .nonceExpired: code = .nonceExpired
        case .sessionExpired, .sessionUnknown: code = .sessionExpired
        case .sessionRevoked: code = .sessionRevoked
        case .notFound, .conversationRetired: code = .notFound
        case .notAParticipant: code = .notAParticipant
        case .alreadyExists: code = .idInUse
        case .invalidArgument: code = .invalidArgument
        case .writeQueueFull, .writeConflict: code = .overloaded
        case .closed: code = .shuttingDown
        default: code = .internalError
        }
        return WireError(code, e.reason)
    }
}
