// The labelling page. Text from the data only ever reaches the page through textContent.
"use strict";

const token = document.querySelector('meta[name="label-token"]').getAttribute("content");
let state = null;      // the server's /api/state
let answer = {};       // the rater's choices for the current item
let claimVerdicts = []; // per claim: true, false or null
let cursor = 0;        // selected claim
let revealed = false;  // the judge's verdict is shown (the item is saved)

// Bidi embedding, override and isolate controls would reorder what the rater reads (text that
// displays differently from what it says): show them as visible code points instead.
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

function shown(text) {
  return String(text).replace(BIDI_CONTROLS, (c) => "[U+" + c.codePointAt(0).toString(16).toUpperCase() + "]");
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = shown(text);
  return node;
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

function show(id, visible) { document.getElementById(id).hidden = !visible; }

function setStatus(text) { document.getElementById("status").textContent = text; }

async function api(path, options) {
  const response = await fetch(path, options);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || ("HTTP " + response.status));
  return data;
}

function renderProgress() {
  const bar = document.getElementById("progress");
  bar.max = Math.max(state.total, 1);
  bar.value = state.done;
  document.getElementById("progress-text").textContent =
    state.done + " / " + state.total + " labelled in batch " + (state.batch === null ? "-" : state.batch) +
    (state.queue ? " (human queue: items no trusted judge settled)" : "");
}

function chunkAnchor(index) { return "chunk-" + index; }

function renderItem(item) {
  document.getElementById("item-id").textContent = shown(item.config_id + " / " + item.query_id);
  document.getElementById("question").textContent = shown(item.question);
  const hasExpected = item.expected_answer !== null && item.expected_answer !== undefined;
  show("expected-box", hasExpected);
  document.getElementById("expected").textContent = hasExpected ? shown(item.expected_answer) : "";
  const index = new Map(item.chunks.map((c, i) => [c.id, i]));

  const chunks = document.getElementById("chunks");
  clear(chunks);
  item.chunks.forEach((chunk, i) => {
    const li = el("li", "chunk");
    li.id = chunkAnchor(i);
    li.appendChild(el("div", "chunk-id", chunk.id));
    li.appendChild(el("div", "text", chunk.text === null ? "(no text for this chunk)" : chunk.text));
    chunks.appendChild(li);
  });

  const claims = document.getElementById("claims");
  clear(claims);
  claimVerdicts = item.claims.map(() => null);
  cursor = 0;
  item.claims.forEach((claim, i) => {
    const li = el("li", "claim");
    li.dataset.index = String(i);
    li.appendChild(el("span", "text", claim.text));
    claim.citations.forEach((cid) => {
      const a = el("a", "cite", "[" + cid + "]");
      if (index.has(cid)) {
        a.href = "#" + chunkAnchor(index.get(cid));
        a.addEventListener("click", () => flash(chunkAnchor(index.get(cid))));
      }
      li.appendChild(document.createTextNode(" "));
      li.appendChild(a);
    });
    const yes = el("button", "claim-yes", "supported (s)");
    yes.type = "button";
    yes.addEventListener("click", () => { cursor = i; markClaim(true); });
    const no = el("button", "claim-no", "not supported (u)");
    no.type = "button";
    no.addEventListener("click", () => { cursor = i; markClaim(false); });
    const buttons = el("span", "claim-buttons");
    buttons.appendChild(yes);
    buttons.appendChild(no);
    li.appendChild(buttons);
    li.addEventListener("click", (event) => { if (event.target === li) { cursor = i; renderClaims(); } });
    claims.appendChild(li);
  });
  if (item.claims.length === 0) claims.appendChild(el("li", "empty", "(the answer is empty)"));

  document.getElementById("row-correct").hidden = !hasExpected;
  document.getElementById("row-citations").hidden = item.citations.length === 0;
  renderClaims();
}

function flash(id) {
  const node = document.getElementById(id);
  if (!node) return;
  node.classList.add("flash");
  setTimeout(() => node.classList.remove("flash"), 1200);
}

function renderClaims() {
  document.querySelectorAll("#claims li.claim").forEach((li) => {
    const i = Number(li.dataset.index);
    li.classList.toggle("selected", i === cursor);
    li.classList.toggle("supported", claimVerdicts[i] === true);
    li.classList.toggle("unsupported", claimVerdicts[i] === false);
  });
}

function markClaim(value) {
  if (revealed || claimVerdicts.length === 0) return;
  claimVerdicts[cursor] = value;
  if (cursor < claimVerdicts.length - 1) cursor += 1;
  renderClaims();
  renderForm();
}

function required() {
  const item = state.item;
  const need = ["faithful"];
  if (item.expected_answer !== null && item.expected_answer !== undefined) need.push("correct");
  if (item.citations.length > 0) need.push("citations_supported");
  return need;
}

function renderForm() {
  document.querySelectorAll("#form button[data-field]").forEach((button) => {
    const value = JSON.parse(button.dataset.value);
    button.classList.toggle("chosen", answer[button.dataset.field] === value);
  });
  const missing = required().filter((f) => answer[f] === undefined);
  const submit = document.getElementById("submit");
  submit.disabled = missing.length > 0 || revealed;
  document.getElementById("missing").textContent = missing.length ? "still to give: " + missing.join(", ") : "";
}

function choose(field, value) {
  if (revealed) return;
  if (field === "correct" && document.getElementById("row-correct").hidden) return;
  if (field === "citations_supported" && document.getElementById("row-citations").hidden) return;
  answer[field] = value;
  renderForm();
}

async function submit() {
  if (revealed || document.getElementById("submit").disabled) return;
  const item = state.item;
  const body = {
    query_id: item.query_id, config_id: item.config_id,
    faithful: answer.faithful,
    correct: answer.correct === undefined ? null : answer.correct,
    citations_supported: answer.citations_supported === undefined ? null : answer.citations_supported,
    note: document.getElementById("note").value || null,
  };
  const claims = [];
  item.claims.forEach((claim, i) => {
    if (claimVerdicts[i] !== null) claims.push({ text: claim.text, supported: claimVerdicts[i] });
  });
  if (claims.length) body.claims = claims;
  try {
    const data = await api("/api/label", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Label-Token": token },
      body: JSON.stringify(body),
    });
    revealed = true;
    state = data.state;
    renderProgress();
    renderReveal(data.judge);
    renderForm();
    setStatus("saved");
  } catch (error) {
    setStatus("not saved: " + error.message);
  }
}

function word(value) {
  if (value === true) return "yes";
  if (value === false) return "no";
  if (value === null || value === undefined) return "-";
  return String(value);
}

function renderReveal(judge) {
  const l = judge.labels;
  let summary = "faithful: " + word(l.faithful) + ", correct: " + word(l.correct) +
    ", citations supported: " + word(l.citations_supported);
  if (judge.confidence !== null) summary += " (confidence " + judge.confidence.toFixed(2) + ", from " + judge.confidence_source + ")";
  if (judge.queued_because) summary += ". Queued for a person: " + judge.queued_because;
  document.getElementById("judge-summary").textContent = shown(summary);
  const list = document.getElementById("judge-claims");
  clear(list);
  judge.claims.forEach((c) => {
    const text = c.claim + " : " + c.verdict + (c.support === null ? "" : " (support " + c.support.toFixed(2) + ")");
    list.appendChild(el("li", "judge-claim", text));
  });
  show("reveal", true);
  document.getElementById("next").focus();
}

function next() {
  revealed = false;
  answer = {};
  document.getElementById("note").value = "";
  show("reveal", false);
  render();
}

function render() {
  renderProgress();
  if (!state.item) {
    show("item", false);
    show("form", false);
    setStatus(state.total ? "This batch is done: every item is labelled. Run `groundjudge label` again for a new batch."
      : "Nothing to label.");
    return;
  }
  setStatus("");
  show("item", true);
  show("form", true);
  renderItem(state.item);
  renderForm();
  window.scrollTo(0, 0);
}

async function load() {
  try {
    state = await api("/api/state");
    render();
  } catch (error) {
    setStatus("cannot reach the label server: " + error.message);
  }
}

document.addEventListener("keydown", (event) => {
  if (!state || !state.item && !revealed) return;
  const typing = event.target && (event.target.tagName === "TEXTAREA" || event.target.tagName === "INPUT");
  if (typing) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); submit(); }
    if (event.key === "Escape") event.target.blur();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (revealed) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); next(); }
    return;
  }
  const key = event.key;
  if (key === "y") choose("faithful", true);
  else if (key === "n") choose("faithful", false);
  else if (key >= "0" && key <= "3" && key.length === 1) choose("correct", Number(key));
  else if (key === "c") choose("citations_supported", true);
  else if (key === "x") choose("citations_supported", false);
  else if (key === "j") { cursor = Math.min(cursor + 1, Math.max(claimVerdicts.length - 1, 0)); renderClaims(); }
  else if (key === "k") { cursor = Math.max(cursor - 1, 0); renderClaims(); }
  else if (key === "s") markClaim(true);
  else if (key === "u") markClaim(false);
  else if (key === "Enter") { event.preventDefault(); submit(); }
  else return;
});

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("#form button[data-field]").forEach((button) => {
    button.addEventListener("click", () => choose(button.dataset.field, JSON.parse(button.dataset.value)));
  });
  document.getElementById("submit").addEventListener("click", submit);
  document.getElementById("next").addEventListener("click", next);
  load();
});
