import Foundation
import LaminaNode
import Testing

/// Python's standard library (http.client) over HTTP/1.1 against every Server API resource and
/// its errors, on one kept-alive connection: identities, conversations, messages (as the system
/// and as a user), part updates, rich content (declare, chunked upload to the signed upload_url,
/// send, refresh), deletions, sessions, webhooks, and the general refusals (Accept, method,
/// JSON, body size, app id, endpoint). Each line is a request's label, status and Layer error id.
@Suite struct ServerAPIPythonTests {
    static let script = #"""
        import http.client, json, ssl, sys
        ctx = ssl.create_default_context(cafile=sys.argv[1])
        host, port = sys.argv[2].rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=ctx)
        sock = None
        V3 = {"Authorization": "Bearer " + sys.argv[4], "Accept": "application/vnd.layer+json; version=3.0", "Content-Type": "application/json"}
        V1 = dict(V3, Accept="application/vnd.layer+json; version=1.0")
        WH = dict(V3, Accept="application/vnd.layer.webhooks+json; version=3.0")
        base = "/apps/" + sys.argv[3]
        def call(label, method, path, body=None, headers=V3, raw=False):
            global sock
            data = body if raw or body is None else json.dumps(body)
            conn.request(method, path if path.startswith("/") and path.startswith("/apps/") else base + path, data, headers)
            r = conn.getresponse()
            text = r.read()
            if sock is None: sock = conn.sock
            try: obj = json.loads(text) if text else None
            except Exception: obj = None
            err = obj.get("id") if isinstance(obj, dict) and "code" in obj else ""
            print(label, r.status, err if err else "")
            return r, obj
        # identities
        call("identity-create", "POST", "/users/alice/identity", {"display_name": "Alice", "first_name": "A"})
        r, o = call("identity-get", "GET", "/users/alice/identity"); print("display", o["display_name"])
        call("identity-again", "POST", "/users/alice/identity", {"display_name": "x"})
        call("identity-patch", "PATCH", "/users/alice/identity", [{"operation": "set", "property": "last_name", "value": "B"}],
             headers=dict(V3, **{"Content-Type": "application/vnd.layer-patch+json"}))
        call("identity-put", "PUT", "/users/alice/identity", {"display_name": "Al"})
        call("identity-bad", "PUT", "/users/alice/identity", {"nickname": "x"})
        call("identity-unknown", "GET", "/users/nobody/identity")
        # conversations
        r, c = call("conv-create", "POST", "/conversations", {"participants": ["alice", "bob"], "metadata": {"title": "t"}})
        cid = c["id"].split("/")[-1]
        call("conv-distinct", "POST", "/conversations", {"participants": ["alice", "bob"], "metadata": {"title": "t"}})
        call("conv-conflict", "POST", "/conversations", {"participants": ["alice", "bob"], "metadata": {"title": "other"}})
        call("conv-get", "GET", "/conversations/" + cid)
        call("conv-unknown", "GET", "/conversations/00000000-0000-4000-8000-000000000000")
        call("conv-patch", "PATCH", "/conversations/" + cid, [{"operation": "set", "property": "metadata.title", "value": "new"}],
             headers=dict(V3, **{"Content-Type": "application/vnd.layer-patch+json"}))
        call("conv-patch-bad", "PATCH", "/conversations/" + cid, [{"operation": "explode", "property": "participants"}],
             headers=dict(V3, **{"Content-Type": "application/vnd.layer-patch+json"}))
        r, lst = call("conv-list", "GET", "/users/bob/conversations"); print("listed", len(lst))
        call("conv-no-participants", "POST", "/conversations", {"distinct": False})
        # messages
        r, m = call("msg-send", "POST", "/conversations/" + cid + "/messages",
                    {"sender_id": "layer:///identities/alice", "parts": [{"body": "hi", "mime_type": "text/plain"}]})
        mid = m["id"].split("/")[-1]
        call("msg-get", "GET", "/conversations/" + cid + "/messages/" + mid)
        r, ms = call("msg-list-user", "GET", "/users/bob/conversations/" + cid + "/messages"); print("unread", ms[0]["is_unread"])
        call("msg-mark-all-read", "POST", "/users/bob/conversations/" + cid + "/mark_all_read")
        call("msg-no-parts", "POST", "/conversations/" + cid + "/messages", {"sender_id": "layer:///identities/alice"})
        call("msg-inline-too-large", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/alice", "parts": [{"body": "x" * 2049, "mime_type": "text/plain"}]})
        call("msg-not-participant", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/mallory", "parts": [{"body": "x", "mime_type": "text/plain"}]})
        # parts (3.0)
        r, p = call("part-add", "POST", "/conversations/" + cid + "/messages/" + mid + "/parts", {"body": "second", "mime_type": "text/plain"})
        pid = p["id"].split("/")[-1]
        call("part-replace", "PUT", "/conversations/" + cid + "/messages/" + mid + "/parts/" + pid, {"body": "2nd", "mime_type": "text/plain"})
        call("part-delete", "DELETE", "/conversations/" + cid + "/messages/" + mid + "/parts/" + pid)
        call("part-unknown", "DELETE", "/conversations/" + cid + "/messages/" + mid + "/parts/00000000-0000-4000-8000-000000000000")
        call("part-v1", "POST", "/conversations/" + cid + "/messages/" + mid + "/parts", {"body": "x", "mime_type": "text/plain"}, headers=V1)
        # rich content
        r, ct = call("content-create", "POST", "/content", headers=dict(V3, **{"Upload-Content-Type": "image/png", "Upload-Content-Length": "5000"}))
        up = ct["upload_url"].split(sys.argv[2], 1)[1]
        call("content-chunk", "PUT", up, b"a" * 3000, headers={"Content-Range": "bytes 0-2999/5000"}, raw=True)
        call("content-gap", "PUT", up, b"a" * 1000, headers={"Content-Range": "bytes 4000-4999/5000"}, raw=True)
        call("content-not-ready", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/alice", "parts": [{"mime_type": "image/png", "content": {"id": ct["id"], "size": 5000}}]})
        call("content-rest", "PUT", up, b"b" * 2000, headers={"Content-Range": "bytes 3000-4999/5000"}, raw=True)
        call("content-size-mismatch", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/alice", "parts": [{"mime_type": "image/png", "content": {"id": ct["id"], "size": 4000}}]})
        call("content-unknown", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/alice", "parts": [{"mime_type": "image/png", "content": {"id": "layer:///content/00000000-0000-4000-8000-000000000000", "size": 1}}]})
        r, cm = call("content-send", "POST", "/conversations/" + cid + "/messages",
             {"sender_id": "layer:///identities/alice", "parts": [{"mime_type": "image/png", "content": {"id": ct["id"], "size": 5000}}]})
        dl = cm["parts"][0]["content"]["download_url"].split(sys.argv[2], 1)[1]
        conn.request("GET", dl)
        r = conn.getresponse(); got = r.read(); print("content-download", r.status, got == b"a" * 3000 + b"b" * 2000)
        call("content-get", "GET", "/content/" + ct["id"].split("/")[-1])
        call("content-too-large", "POST", "/content", headers=dict(V3, **{"Upload-Content-Length": "2147483649"}))
        # messages deleted, conversation deleted
        call("msg-delete", "DELETE", "/conversations/" + cid + "/messages/" + mid)
        call("msg-deleted", "GET", "/conversations/" + cid + "/messages/" + mid)
        call("conv-delete", "DELETE", "/conversations/" + cid)
        call("conv-deleted", "GET", "/conversations/" + cid)
        # sessions, webhooks
        call("sessions-revoke", "DELETE", "/users/alice/sessions")
        r, w = call("webhooks-list", "GET", "/webhooks", headers=WH); print("webhooks", w)
        call("webhooks-bad", "POST", "/webhooks", {"target_url": "http://x", "events": ["message.sent"], "secret": "short"}, headers=WH)
        call("identity-delete", "DELETE", "/users/alice/identity")
        # general errors
        call("bad-accept", "GET", "/users/bob/conversations", headers=dict(V3, Accept="application/json"))
        call("bad-method", "PUT", "/conversations", {"participants": ["a"]})
        call("bad-json", "POST", "/conversations", "{not json", raw=True)
        print("same-connection", conn.sock is sock)
        # A body over the limit is answered at its head and not read: the node then closes the
        # connection (`connection: close`); http.client opens a new one for the next request.
        call("too-large", "POST", "/conversations", "{\"participants\":[\"" + "a" * 300000 + "\"]}", raw=True)
        print("closed-after-too-large", conn.sock is None)
        call("bad-app", "GET", "/apps/nope/users/bob/conversations")
        call("no-endpoint", "GET", "/nothing")
        """#

    @Test func pythonHTTPClientReachesEveryResourceAndItsErrors() async throws {
        let node = try await TestNode.start("api-python-all")
        let api = CurlAPI(node.server)
        let result = try await ExternalCommand.run(
            "/usr/bin/python3",
            [
                "-c", Self.script, node.server.prepared.certificatePath,
                node.server.url.replacingOccurrences(of: "https://", with: ""),
                api.appID, api.token,
            ])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let expected = [
            "identity-create 201",
            "identity-get 200",
            "display Alice",
            "identity-again 409 conflict",
            "identity-patch 204",
            "identity-put 204",
            "identity-bad 422 invalid_property",
            "identity-unknown 404 not_found",
            "conv-create 201",
            "conv-distinct 200",
            "conv-conflict 409 conflict",
            "conv-get 200",
            "conv-unknown 404 not_found",
            "conv-patch 204",
            "conv-patch-bad 422 invalid_property",
            "conv-list 200",
            "listed 1",
            "conv-no-participants 422 missing_property",
            "msg-send 201",
            "msg-get 200",
            "msg-list-user 200",
            "unread True",
            "msg-mark-all-read 204",
            "msg-no-parts 422 missing_property",
            "msg-inline-too-large 422 invalid_property",
            "msg-not-participant 403 access_denied",
            "part-add 201",
            "part-replace 204",
            "part-delete 204",
            "part-unknown 404 not_found",
            "part-v1 404 invalid_endpoint",
            "content-create 201",
            "content-chunk 308",
            "content-gap 409 conflict",
            "content-not-ready 409 conflict",
            "content-rest 201",
            "content-size-mismatch 422 invalid_property",
            "content-unknown 404 not_found",
            "content-send 201",
            "content-download 200 True",
            "content-get 200",
            "content-too-large 413 request_too_large",
            "msg-delete 204",
            "msg-deleted 410 object_deleted",
            "conv-delete 204",
            "conv-deleted 410 object_deleted",
            "sessions-revoke 204",
            "webhooks-list 200",
            "webhooks []",
            "webhooks-bad 422 invalid_property",
            "identity-delete 204",
            "bad-accept 406 invalid_header",
            "bad-method 405 method_not_allowed",
            "bad-json 400 invalid_request",
            "same-connection True",
            "too-large 413 request_too_large",
            "closed-after-too-large True",
            "bad-app 404 invalid_app_id",
            "no-endpoint 404 invalid_endpoint",
        ]
        #expect(lines == expected, "\(zip(lines, expected).filter { $0 != $1 })")
        await node.stop()
    }
}
