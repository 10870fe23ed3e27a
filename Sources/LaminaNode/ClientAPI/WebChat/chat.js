// Lamina's web chat: a plain page on Layer's Client API (REST for commands and history, one
// WebSocket for live changes and typing). Served by the node in its development mode.
'use strict';

const ACCEPT = 'application/vnd.layer+json; version=2.0';
const TYPING_PAUSE_MS = 2500;
const state = {
  user: null, token: null, appID: null,
  conversations: new Map(), // id -> conversation object
  open: null,                // the open conversation's id
  messages: new Map(),       // id -> message object (open conversation)
  socket: null, lastTimestamp: null, requests: 0, closing: false,
  typing: { state: 'finished', timer: null, lastSent: 0 },
  peersTyping: new Map(),    // user id -> timer
};
const $ = (id) => document.getElementById(id);
const uuidOf = (layerID) => layerID.split('/').pop();

function showStatus(text) { $('status').textContent = text || ''; }

async function api(method, path, body, contentType) {
  const headers = { 'Accept': ACCEPT };
  if (state.token) headers['Authorization'] = `Layer session-token="${state.token}"`;
  if (body !== undefined) headers['Content-Type'] = contentType || 'application/json';
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (response.status === 401 && state.token) { signOut('Your session ended; sign in again.'); }
  if (!response.ok && response.status !== 409) {
    const reason = data && data.message ? data.message : `HTTP ${response.status}`;
    throw new Error(`${method} ${path}: ${reason}`);
  }
  return { status: response.status, data };
}

// --- Authentication: nonce -> identity token (the node's development provider) -> session.

async function signIn(user) {
  state.token = null;
  const nonce = (await api('POST', '/nonces')).data.nonce;
  const minted = (await api('POST', '/dev/identity_tokens', { user_id: user, nonce })).data;
  const session = (await api('POST', '/sessions', { identity_token: minted.identity_token, app_id: minted.app_id })).data;
  state.user = user; state.token = session.session_token; state.appID = minted.app_id;
  sessionStorage.setItem('lamina.session', JSON.stringify({ user, token: state.token, appID: state.appID }));
  await start();
}

function signOut(reason) {
  sessionStorage.removeItem('lamina.session');
  state.closing = true;
  if (state.socket) state.socket.close();
  state.token = null;
  $('app').style.display = 'none';
  $('login').style.display = 'flex';
  showStatus(reason);
}

async function start() {
  $('login').style.display = 'none';
  $('app').style.display = 'flex';
  $('me').textContent = state.user;
  state.closing = false;
  const list = (await api('GET', '/conversations?page_size=100')).data;
  for (const conversation of list) state.conversations.set(conversation.id, conversation);
  renderConversations();
  connectSocket();
  const remembered = sessionStorage.getItem('lamina.open');
  if (remembered && state.conversations.has(remembered)) await openConversation(remembered);
}

// --- Conversations.

function peersOf(conversation) {
  return conversation.participants.map((p) => p.user_id).filter((u) => u !== state.user);
}

function renderConversations() {
  const ul = $('conversations');
  ul.textContent = '';
  for (const conversation of state.conversations.values()) {
    const li = document.createElement('li');
    li.dataset.id = conversation.id;
    li.textContent = peersOf(conversation).join(', ') || '(only you)';
    if (conversation.id === state.open) li.classList.add('open');
    if (conversation.unread_message_count > 0 && conversation.id !== state.open) {
      li.classList.add('unread');
      li.textContent += ` (${conversation.unread_message_count})`;
    }
    li.onclick = () => openConversation(conversation.id).catch((e) => showStatus(e.message));
    ul.appendChild(li);
  }
}

async function startConversation(peer) {
  const body = { participants: [state.user, peer], distinct: true };
  const result = await api('POST', '/conversations', body);
  // 201: created; 200: the existing distinct conversation; 409: it exists with other metadata.
  const conversation = result.status === 409 ? result.data.data : result.data;
  state.conversations.set(conversation.id, conversation);
  await openConversation(conversation.id);
}

async function openConversation(id) {
  state.open = id;
  sessionStorage.setItem('lamina.open', id);
  state.messages.clear();
  $('messages').textContent = '';
  $('typing').textContent = '';
  $('text').disabled = false;
  $('send').disabled = false;
  const page = (await api('GET', `/conversations/${uuidOf(id)}/messages?page_size=100`)).data;
  for (const message of page.reverse()) addMessage(message);
  const conversation = state.conversations.get(id);
  if (conversation) conversation.unread_message_count = 0;
  renderConversations();
  $('text').focus();
}

// --- Messages and their marks.

function markOf(message) {
  if (!message.sender || message.sender.user_id !== state.user) return '';
  if (message.pending) return '…';
  const others = Object.entries(message.recipient_status || {})
    .filter(([identity]) => uuidOf(identity) !== state.user).map(([, status]) => status);
  if (others.length === 0) return '✓';
  if (others.every((s) => s === 'read')) return '✓✓ read';
  if (others.every((s) => s === 'read' || s === 'delivered')) return '✓✓';
  return '✓';
}

function textOf(message) {
  return (message.parts || []).map((p) => (p.mime_type || '').startsWith('text/') ? (p.body || '') : `[${p.mime_type}]`)
    .join(' ');
}

function renderMessage(message) {
  let div = document.querySelector(`.message[data-id="${CSS.escape(message.id)}"]`);
  if (!div) {
    div = document.createElement('div');
    div.className = 'message';
    div.dataset.id = message.id;
    div.dataset.testid = 'message';
    const box = $('messages');
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    box.appendChild(div);
    if (atBottom) box.scrollTop = box.scrollHeight;
  }
  const mine = message.sender && message.sender.user_id === state.user;
  div.classList.toggle('mine', mine);
  div.textContent = '';
  const sender = document.createElement('span');
  sender.className = 'sender';
  sender.textContent = message.sender ? (message.sender.display_name || message.sender.user_id) : '';
  const body = document.createElement('span');
  body.className = 'body';
  body.textContent = textOf(message);
  const mark = document.createElement('span');
  mark.className = 'mark';
  mark.dataset.testid = 'mark';
  mark.textContent = markOf(message);
  div.append(sender, body, mark);
}

function addMessage(message) {
  state.messages.set(message.id, message);
  renderMessage(message);
  const fromOther = message.sender && message.sender.user_id !== state.user;
  if (fromOther && message.is_unread !== false && document.visibilityState === 'visible') {
    message.is_unread = false;
    api('POST', `/messages/${uuidOf(message.id)}/receipts`, { type: 'read' }).catch((e) => showStatus(e.message));
  }
}

async function send(text) {
  const id = `layer:///messages/${crypto.randomUUID()}`;
  const conversationID = state.open;
  const local = { id, conversation: { id: conversationID }, parts: [{ mime_type: 'text/plain', body: text }],
    sender: { user_id: state.user, display_name: state.user }, recipient_status: {}, pending: true };
  addMessage(local);
  const body = { id, parts: [{ mime_type: 'text/plain', body: text }],
    notification: { text: `${state.user}: ${text.slice(0, 100)}`, sound: 'default' } };
  const result = await api('POST', `/conversations/${uuidOf(conversationID)}/messages`, body);
  const sent = result.data;
  const known = state.messages.get(id);
  if (known && known !== local) return; // the WebSocket's create came first and is newer
  if (conversationID === state.open) addMessage(sent);
}

// --- The WebSocket: change packets, typing signals, replay after a reconnect.

function connectSocket() {
  const url = `wss://${location.host}/websocket?session_token=${encodeURIComponent(state.token)}`;
  const socket = new WebSocket(url, 'layer-2.0');
  state.socket = socket;
  socket.onopen = () => {
    showStatus('');
    document.body.dataset.socket = 'open';
    if (state.lastTimestamp) request('Event.replay', { from_timestamp: state.lastTimestamp });
  };
  socket.onmessage = (event) => {
    let packet;
    try { packet = JSON.parse(event.data); } catch { return; }
    if (packet.timestamp) state.lastTimestamp = packet.timestamp;
    if (packet.type === 'change') applyChange(packet.body);
    else if (packet.type === 'signal') applySignal(packet.body);
  };
  socket.onclose = () => {
    document.body.dataset.socket = 'closed';
    if (state.closing || !state.token) return;
    showStatus('Reconnecting…');
    setTimeout(() => { if (state.token) connectSocket(); }, 1000);
  };
}

function request(method, data) {
  if (!state.socket || state.socket.readyState !== WebSocket.OPEN) return;
  state.requests += 1;
  const body = { request_id: `r${state.requests}`, method, data };
  state.socket.send(JSON.stringify({ type: 'request', body }));
}

function applyChange(change) {
  const object = change.object || {};
  if (object.type === 'Message') {
    if (change.operation === 'create') {
      const message = change.data;
      const conversationID = message.conversation && message.conversation.id;
      if (conversationID === state.open) {
        addMessage(message);
        clearTyping(message.sender && message.sender.user_id);
      } else if (state.conversations.has(conversationID) && message.sender.user_id !== state.user) {
        state.conversations.get(conversationID).unread_message_count += 1;
        renderConversations();
      }
    } else if (change.operation === 'update') {
      const message = state.messages.get(object.id);
      if (!message) return;
      for (const op of change.data || []) applyPatch(message, op);
      renderMessage(message);
    } else if (change.operation === 'delete') {
      state.messages.delete(object.id);
      const div = document.querySelector(`.message[data-id="${CSS.escape(object.id)}"]`);
      if (div) div.remove();
    }
  } else if (object.type === 'Conversation') {
    if (change.operation === 'create') {
      state.conversations.set(change.data.id, change.data);
    } else if (change.operation === 'update') {
      const conversation = state.conversations.get(object.id);
      if (conversation) for (const op of change.data || []) applyPatch(conversation, op);
    } else if (change.operation === 'delete') {
      state.conversations.delete(object.id);
    }
    renderConversations();
  }
}

// A layer-patch operation on the few properties the page shows.
function applyPatch(target, op) {
  const property = op.property || '';
  if (property.startsWith('recipient_status.')) {
    target.recipient_status = target.recipient_status || {};
    target.recipient_status[property.slice('recipient_status.'.length)] = op.value;
    delete target.pending;
  } else if (property === 'recipient_status' && op.operation === 'set') {
    target.recipient_status = op.value;
    delete target.pending;
  } else if (property === 'unread_message_count' && op.operation === 'set') {
    target.unread_message_count = op.value;
  } else if (property === 'participants') {
    const id = op.value && (op.value.id || op.value);
    if (op.operation === 'add') target.participants.push(op.value);
    if (op.operation === 'remove') target.participants = target.participants.filter((p) => p.id !== id);
    if (op.operation === 'set') target.participants = op.value;
  }
}

function applySignal(signal) {
  if (signal.type !== 'typing_indicator') return;
  const sender = signal.data && signal.data.sender;
  if (!sender || sender.user_id === state.user || !signal.object || signal.object.id !== state.open) return;
  const who = sender.user_id;
  clearTimeout(state.peersTyping.get(who));
  if (signal.data.action === 'started') {
    // Layer re-sends "started" every 2.5 s; without news for 6 s the indicator goes.
    state.peersTyping.set(who, setTimeout(() => clearTyping(who), 6000));
  } else {
    state.peersTyping.delete(who);
  }
  renderTyping();
}

function clearTyping(who) {
  if (!who) return;
  clearTimeout(state.peersTyping.get(who));
  state.peersTyping.delete(who);
  renderTyping();
}

function renderTyping() {
  const names = [...state.peersTyping.keys()];
  $('typing').textContent = names.length ? `${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} typing…` : '';
}

function sendTyping(action) {
  if (!state.open || !state.socket || state.socket.readyState !== WebSocket.OPEN) return;
  const typing = state.typing;
  if (typing.state === action && (action !== 'started' || Date.now() - typing.lastSent < TYPING_PAUSE_MS)) return;
  typing.state = action;
  typing.lastSent = Date.now();
  state.socket.send(JSON.stringify({
    type: 'signal',
    body: { type: 'typing_indicator', object: { id: state.open }, data: { action } },
  }));
}

// --- Wiring.

$('login').onsubmit = (event) => {
  event.preventDefault();
  signIn($('user').value.trim()).catch((e) => showStatus(e.message));
};
$('start').onsubmit = (event) => {
  event.preventDefault();
  const peer = $('peer').value.trim();
  $('peer').value = '';
  startConversation(peer).catch((e) => showStatus(e.message));
};
$('compose').onsubmit = (event) => {
  event.preventDefault();
  const text = $('text').value;
  if (!text.trim()) return;
  $('text').value = '';
  clearTimeout(state.typing.timer);
  sendTyping('finished');
  send(text).catch((e) => showStatus(e.message));
};
$('text').oninput = () => {
  clearTimeout(state.typing.timer);
  if (!$('text').value) { sendTyping('finished'); return; }
  sendTyping('started');
  state.typing.timer = setTimeout(() => sendTyping('paused'), TYPING_PAUSE_MS);
};
$('logout').onclick = () => {
  if (state.token) api('DELETE', `/sessions/${encodeURIComponent(state.token)}`).catch(() => {});
  signOut('');
};
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState !== 'visible') return;
  for (const message of state.messages.values()) addMessage(message);
});

const saved = sessionStorage.getItem('lamina.session');
if (saved) {
  const session = JSON.parse(saved);
  state.user = session.user; state.token = session.token; state.appID = session.appID;
  start().catch((e) => showStatus(e.message));
}
