// Runs Layer's Web SDK (3.x, unmodified source; fetched separately, never committed) under Node
// against a Lamina node, as two users: authenticate, a distinct conversation, send, receive on the
// other client, read receipts, typing, a metadata change, a deletion, and a reconnect with replay.
//
// Usage: NODE_PATH=<Debian's node modules + shims> NODE_EXTRA_CA_CERTS=<node cert> \
//        node websdk_run.js <path to the SDK's src/layer.js> https://127.0.0.1:PORT <app id>
// Prints one line per step (PASS/FAIL) and exits non-zero when a step fails.
'use strict';

const [sdkPath, base, appID] = process.argv.slice(2);
const STEP_MS = 15000;

// What a Node app gives the SDK in place of browser features (as its React Native entry does).
// The SDK was written for the Node of its day, which had no atob/btoa: it binds a global atob to
// `window`. Node 20 has them, so they are taken away and served through getNativeSupport instead.
delete globalThis.atob;
delete globalThis.btoa;
// It also reads `window` (IndexedDB, online events) unguarded in places: a bare window (no
// IndexedDB: persistence off; no events) and an XMLHttpRequest (Debian's node-xmlhttprequest).
global.window = globalThis;
// Debian's XMLHttpRequest matches header names case-sensitively: given the SDK's `content-type` it
// adds its own `Content-Type: text/plain` beside it (a browser treats them as one header).
const DebianXHR = require('xmlhttprequest').XMLHttpRequest;
global.XMLHttpRequest = function XMLHttpRequest() {
  const xhr = new DebianXHR();
  const set = xhr.setRequestHeader;
  xhr.setRequestHeader = (name, value) => set.call(xhr, name.toLowerCase() === 'content-type' ? 'Content-Type' : name, value);
  return xhr;
};
global.getNativeSupport = (name) => {
  switch (name) {
    case 'atob': return (s) => Buffer.from(s, 'base64').toString('binary');
    case 'btoa': return (s) => Buffer.from(s, 'binary').toString('base64');
    case 'setImmediate': return setImmediate;
    default: return undefined;
  }
};
const layer = require(sdkPath);

const results = [];
function within(ms, what, executor) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    executor((value) => { clearTimeout(timer); resolve(value); }, (e) => { clearTimeout(timer); reject(e); });
  });
}
async function step(name, body) {
  try {
    await body();
    results.push([name, 'PASS']);
    console.log(`PASS ${name}`);
  } catch (error) {
    results.push([name, `FAIL: ${error.message}`]);
    console.log(`FAIL ${name}: ${error.message}`);
  }
}
function until(client, event, predicate, what) {
  return within(STEP_MS, what, (resolve) => {
    const handler = (evt) => { if (predicate(evt)) { client.off(event, handler); resolve(evt); } };
    client.on(event, handler);
  });
}

async function identityToken(user, nonce) {
  const response = await fetch(`${base}/dev/identity_tokens`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Accept': 'application/vnd.layer+json; version=2.0' },
    body: JSON.stringify({ user_id: user, nonce }),
  });
  if (!response.ok) throw new Error(`dev identity token: HTTP ${response.status}`);
  return (await response.json()).identity_token;
}

// The SDK keeps one Client per app id in a process (a second one destroys the first), so the
// second user names the same app under another environment (the node takes the id's last part).
function makeClient(user, app) {
  // Presence is on, as the SDK's default (the node serves Presence.sync, .update and .subscribe).
  const client = new layer.Client({ isPresenceEnabled: true, appId: app, url: base, websocketUrl: base.replace(/^https/, 'wss') + '/websocket' });
  client.on('challenge', (evt) => {
    identityToken(user, evt.nonce).then((token) => evt.callback(token), (e) => console.log(`challenge: ${e.message}`));
  });
  const ready = within(STEP_MS, `${user} ready`, (resolve) => client.once('ready', resolve));
  client.connect(user);
  return { client, ready };
}

async function main() {
  const alice = makeClient('websdk-alice', appID);
  const bob = makeClient('websdk-bob', appID.replace('/staging/', '/production/'));
  let conversation;
  let bobConversation;
  let sent;

  await step('authenticate (nonce, identity token, session) as two users', async () => {
    await Promise.all([alice.ready, bob.ready]);
    await within(STEP_MS, 'websockets open', (resolve) => {
      const poll = setInterval(() => {
        if (alice.client.socketManager._isOpen() && bob.client.socketManager._isOpen()) {
          clearInterval(poll); resolve();
        }
      }, 50);
    });
  });

  if (results[0][1] !== 'PASS') {
    console.log('websdk run: authentication failed; nothing else can run');
    process.exit(1);
  }

  await step('create a distinct conversation (Conversation.create over the WebSocket)', async () => {
    // Creating is local in the Web SDK until a message is sent or `send()` is called (its
    // Conversation docs): `send()` asks the node now, as an app that shows the conversation at once does.
    conversation = alice.client.createConversation({ participants: ['websdk-bob'], distinct: true });
    conversation.send();
    await within(STEP_MS, 'conversations:sent', (resolve, reject) => {
      conversation.once('conversations:sent', resolve);
      conversation.once('conversations:sent-error', (e) => reject(new Error(JSON.stringify(e.error))));
    });
    const again = alice.client.createConversation({ participants: ['websdk-bob'], distinct: true });
    if (again.id !== conversation.id) {
      await within(STEP_MS, 'second create answered', (resolve) => again.once('conversations:sent', resolve));
      if (again.id !== conversation.id) throw new Error(`distinct create gave ${again.id} then ${conversation.id}`);
    }
  });

  await step('send (Message.create) and receive live on the second client', async () => {
    const received = until(bob.client, 'messages:add', (evt) => evt.messages.some((m) => m.parts[0].body === 'hello from the Web SDK'), 'bob receives');
    sent = conversation.createMessage('hello from the Web SDK');
    sent.send();
    await within(STEP_MS, 'messages:sent', (resolve, reject) => {
      sent.once('messages:sent', resolve);
      sent.once('messages:sent-error', (e) => reject(new Error(JSON.stringify(e.error))));
    });
    const evt = await received;
    bobConversation = bob.client.getConversation(conversation.id, false);
    if (!bobConversation) throw new Error('bob has no conversation object');
    bob.message = evt.messages.find((m) => m.parts[0].body === 'hello from the Web SDK');
  });

  await step('read receipt: bob reads, alice sees readStatus ALL', async () => {
    // Bob's SDK may mark it read as it arrives (before this step): then alice may already know.
    const all = layer.Constants.RECIPIENT_STATE.ALL;
    const seen = sent.readStatus === all ? Promise.resolve()
      : until(alice.client, 'messages:change', (evt) => evt.target.id === sent.id && sent.readStatus === all, 'alice sees read');
    bob.message.isRead = true;
    await seen;
    if (sent.recipientStatus['layer:///identities/websdk-bob'] !== layer.Constants.RECEIPT_STATE.READ) {
      throw new Error(`bob's status on alice's message: ${JSON.stringify(sent.recipientStatus)}`);
    }
  });

  await step('typing: alice sees bob typing', async () => {
    const typing = until(alice.client, 'typing-indicator-change', (evt) => evt.conversationId === conversation.id && evt.typing.length > 0, 'typing-indicator-change');
    const publisher = bob.client.createTypingPublisher();
    publisher.setConversation(bobConversation);
    publisher.setState(layer.TypingIndicators.STARTED);
    await typing;
    publisher.setState(layer.TypingIndicators.FINISHED);
  });

  await step('metadata change reaches the other client', async () => {
    const changed = until(bob.client, 'conversations:change', () => bobConversation.metadata && bobConversation.metadata.title === 'Web SDK run', 'bob sees metadata');
    conversation.setMetadataProperties({ title: 'Web SDK run' });
    await changed;
  });

  await step('deletion for all participants reaches the other client', async () => {
    const doomed = conversation.createMessage('to be deleted');
    doomed.send();
    await within(STEP_MS, 'sent', (resolve) => doomed.once('messages:sent', resolve));
    await until(bob.client, 'messages:add', (evt) => evt.messages.some((m) => m.id === doomed.id), 'bob receives it');
    const removed = until(bob.client, 'messages:remove', (evt) => evt.messages.some((m) => m.id === doomed.id), 'bob sees removal');
    doomed.delete(layer.Constants.DELETION_MODE.ALL);
    await removed;
  });

  await step('reconnect with Event.replay: what was sent while bob was away arrives', async () => {
    bob.client.socketManager.close();
    const missed = conversation.createMessage('while bob was away');
    missed.send();
    await within(STEP_MS, 'sent', (resolve) => missed.once('messages:sent', resolve));
    const arrived = until(bob.client, 'messages:add', (evt) => evt.messages.some((m) => m.id === missed.id), 'bob gets the missed message');
    bob.client.socketManager.connect();
    await arrived;
  });

  const failed = results.filter(([, r]) => r !== 'PASS');
  console.log(`websdk run: ${results.length - failed.length}/${results.length} steps passed`);
  process.exit(failed.length ? 1 : 0);
}

main().catch((e) => { console.log(`FAIL harness: ${e.stack}`); process.exit(2); });
