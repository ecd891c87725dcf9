// The run explorer's page: renders the list of runs at / and a run at
// /runs/ID, the competitions at /competitions and one at /competitions/ID,
// from the server's event streams (server.go), which send the whole view
// at once and again at every change. Everything from the chain goes into
// text nodes, never HTML.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';

// node builds an element in namespace ns: attrs are attributes (null ones
// left out), children nodes or text.
function node(ns, tag, attrs, children) {
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}
const el = (tag, attrs, ...children) => node(null, tag, attrs, children);
const svg = (tag, attrs, ...children) => node(SVG, tag, attrs, children);

// Formatting.
const dash = '—';
const short = (k) => (k && k.length > 12 ? k.slice(0, 4) + '…' + k.slice(-4) : k || dash);
const keyEl = (k) => (k ? el('code', { title: k }, short(k)) : dash);
// withKeys shows a line of text with its base58 keys shortened, as keyEl does.
function withKeys(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/\b[1-9A-HJ-NP-Za-km-z]{32,44}\b/g)) {
    out.push(text.slice(last, m.index), keyEl(m[0]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}
const num = (n) => (n === null || n === undefined ? dash : Number(n).toLocaleString('en-US'));
const finite = (v) => typeof v === 'number' && Number.isFinite(v);
const fixed = (v, d) => (finite(v) ? v.toFixed(d) : v === null || v === undefined ? dash : String(v));
const badge = (s) => el('span', { class: 'badge ' + (s || '').replace(/\s+/g, '-') }, s || 'unknown');
function human(v, units) {
  if (!finite(v)) return dash;
  let i = 0;
  while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (i ? v.toFixed(1) : String(Math.round(v))) + units[i];
}
const params = (v) => human(v, ['', 'K', 'M', 'B', 'T']);
function ago(t) {
  if (!t) return dash;
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 90) return Math.round(s) + ' s ago';
  if (s < 5400) return Math.round(s / 60) + ' min ago';
  if (s < 172800) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' d ago';
}
const timeEl = (t) => (t ? el('time', { datetime: new Date(t * 1000).toISOString(), title: new Date(t * 1000).toLocaleString(), 'data-ago': t }, ago(t)) : dash);
const activity = (a) => (a ? [timeEl(a.time), el('span', { class: 'muted' }, ' slot ' + num(a.slot))] : dash);
function model(c) {
  if (!c || !c.architecture || c.architecture.startsWith('unknown')) return dash;
  return c.architecture + ' ' + (c.parameters ? params(c.parameters) : c.layers + '×' + c.width) +
    (c.precision && c.precision !== 'fp32' ? ', ' + c.precision : '') +
    (c.grad_shards > 1 ? ', ' + c.grad_shards + ' grad shards' : '');
}
const batch = (c) => (!c ? dash : c.batch_start === c.batch_end ? num(c.batch_start) : num(c.batch_start) + '→' + num(c.batch_end));
function mode(c) {
  if (!c || !c.mode || c.mode.startsWith('unknown')) return dash;
  return c.mode + (c.inner_steps > 1 ? ' ×' + c.inner_steps : '') + (c.overlap ? ', overlap' : '');
}
function tokens(v, decimals) {
  if (!finite(v)) return dash;
  return decimals ? (v / 10 ** decimals).toLocaleString('en-US', { maximumFractionDigits: decimals }) : num(v);
}

// table wraps a table in a box that scrolls sideways on narrow screens.
// cols: [label, numeric?]; rows: arrays of cells.
function table(id, cols, rows) {
  return el('div', { class: 'table-wrap' },
    el('table', { id },
      el('thead', {}, el('tr', {}, cols.map(([label, n]) => el('th', { class: n ? 'num' : null }, label)))),
      el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c, i) => el('td', { class: cols[i][1] ? 'num' : cols[i][2] || null }, c)))))));
}
const facts = (pairs) => el('dl', { class: 'facts' }, pairs.map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', {}, v))));
const section = (title, ...body) => [el('h2', {}, title), ...body];
const empty = (text) => el('p', { class: 'muted' }, text);

// niceTicks picks about n round values spanning [lo, hi].
function niceTicks(lo, hi, n) {
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

const palette = ['#0b62d6', '#d9480f', '#2b8a3e', '#ae3ec9', '#e67700', '#1098ad', '#c2255c', '#5f3dc4'];

// lineChart draws series ({name, points: [[x, y]...]}) as an SVG that
// scales with its box. Each series is a polyline of all its points; x is
// a step unless xLabel says otherwise.
function lineChart(id, caption, series, yFormat, xLabel = 'step') {
  const W = 640, H = 260, m = { l: 66, r: 14, t: 12, b: 34 };
  const pts = series.flatMap((s) => s.points);
  if (!pts.length) return el('figure', {}, el('figcaption', {}, caption), empty('No data yet.'));
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const pad = (y1 - y0) * 0.08 || Math.abs(y0) * 0.1 || 1;
  y0 -= pad; y1 += pad;
  const X = (x) => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const Y = (y) => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const g = svg('svg', { id, class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': caption });
  for (const v of niceTicks(y0, y1, 5)) {
    g.append(svg('line', { class: 'grid', x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }),
      svg('text', { x: m.l - 6, y: Y(v) + 4, 'text-anchor': 'end' }, yFormat(v)));
  }
  for (const v of niceTicks(x0, x1, 6).filter((v) => Number.isInteger(v))) {
    g.append(svg('text', { x: X(v), y: H - m.b + 16, 'text-anchor': 'middle' }, num(v)));
  }
  g.append(svg('text', { x: W - m.r, y: H - 2, 'text-anchor': 'end' }, xLabel));
  series.forEach((s, i) => {
    const color = palette[i % palette.length];
    g.append(svg('polyline', { class: 'series', stroke: color, 'data-series': s.name,
      points: s.points.map((p) => X(p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1)).join(' ') }));
    if (s.points.length <= 80) {
      for (const p of s.points) {
        g.append(svg('circle', { cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: color },
          svg('title', {}, `${s.name} ${xLabel} ${p[0]}: ${yFormat(p[1])}`)));
      }
    }
  });
  const legend = series.length > 1
    ? el('div', { class: 'legend' }, series.map((s, i) => el('span', { style: `--c:${palette[i % palette.length]}` }, s.name)))
    : null;
  return el('figure', {}, el('figcaption', {}, caption), g, legend);
}

// Connection state, shown in the header: live; the chain unreachable (the
// server answers, its reads of the chain fail: the page shows the last
// data read); or the server unreachable.
const statusEl = document.getElementById('status');
function setStatus(v, connected) {
  statusEl.removeAttribute('title');
  if (!connected) {
    statusEl.className = 'status down';
    statusEl.replaceChildren('reconnecting…');
  } else if (v.error) {
    const since = new Date((v.error_since || Date.now() / 1000) * 1000);
    statusEl.className = 'status unreachable';
    statusEl.title = 'last error: ' + v.error;
    statusEl.replaceChildren('chain unreachable since ', el('time', { datetime: since.toISOString() }, since.toLocaleString()),
      ' · showing the last data read');
  } else {
    statusEl.className = 'status live';
    statusEl.replaceChildren(v.source === 'websocket' ? 'live (websocket)' : 'live (polling the RPC)');
  }
}

// follow renders every "update" of an event stream. Tests and the
// benchmark read window.explorer: how many renders there were, when the
// last one was, and when each of the last 100 was (times[n % 100] for the
// n-th, from 0), in ms since the epoch.
window.explorer = { renders: 0, lastRender: 0, times: [] };
function follow(url, render, gone) {
  const es = new EventSource(url);
  es.addEventListener('update', (e) => {
    const v = JSON.parse(e.data);
    setStatus(v, true);
    render(v);
    const x = window.explorer;
    x.lastRender = x.times[x.renders % 100] = Date.now();
    x.renders++;
    document.body.dataset.ready = '1';
  });
  es.addEventListener('gone', (e) => { es.close(); gone(JSON.parse(e.data).error); });
  es.onerror = () => setStatus(null, false);
}

const app = document.getElementById('app');

function renderRuns(list) {
  document.title = 'Runs · Psyche run explorer';
  const rows = list.runs.map((r) => [
    el('a', { href: '/runs/' + encodeURIComponent(r.run_id) }, r.run_id), badge(r.state), num(r.epoch), num(r.step),
    num(r.members), model(r.config), batch(r.config), r.config ? num(r.config.total_steps) : dash, mode(r.config),
    activity(r.last_activity)]);
  app.replaceChildren(el('div', { id: 'runs-view' }, el('h1', {}, 'Runs'),
    rows.length ? table('runs', [['Run'], ['State'], ['Epoch', 1], ['Step', 1], ['Members', 1], ['Model'], ['Batch', 1],
      ['Total steps', 1], ['Mode'], ['Last activity']], rows) : empty('No runs on this cluster yet.')));
}

function renderRun(d) {
  document.title = d.run_id + ' · Psyche run explorer';
  const c = d.config;
  const total = c ? c.total_steps : 0;
  const t = d.treasury;
  app.replaceChildren(el('div', { id: 'run-view' },
    el('h1', {}, d.run_id, ' ', badge(d.state), d.treasurer ? [' ', badge('treasurer')] : null),
    d.description ? el('p', {}, d.description) : null,
    d.state_error ? el('p', { class: 'error' }, d.state_error) : null,
    total ? el('progress', { max: total, value: Math.min(d.step, total), title: `step ${d.step} of ${total}` }) : null,
    facts([
      ['Epoch · step', `${num(d.epoch)} · ${num(d.step)}${total ? ' of ' + num(total) : ''}`],
      ['Members', num(d.members)], ['Model', model(c)], ['Batch', batch(c)], ['Mode', mode(c)],
      ['Phase since', timeEl(d.phase_start)], ['Phase deadline', d.deadline ? el('span', { 'data-until': d.deadline }, until(d.deadline)) : dash],
      ['Last activity', activity(d.last_activity)], ['Pause pending', d.pending_pause ? 'yes' : 'no'],
      ['Client version', d.client_version || dash], ['Main authority', keyEl(d.main_authority)], ['Join authority', keyEl(d.join_authority)],
    ]),
    el('div', { class: 'charts' },
      lineChart('loss-chart', 'Training loss (witness reports)',
        [{ name: 'loss', points: d.loss.filter((p) => finite(p.loss)).map((p) => [p.step, p.loss]) }], (v) => fixed(v, 3)),
      lineChart('eval-chart', 'Evaluations (acc_norm)', evalSeries(d.evals), (v) => fixed(v, 2))),
    d.prompts.length ? section('Prompt task', table('prompts', [['Step', 1], ['Epoch', 1], ['Prompt', 1], ['Continuation', 0, 'wrap'], ['Client']],
      d.prompts.slice().reverse().map((p) => [num(p.step), num(p.epoch), `#${p.prompt}`, p.text || p.tokens.join(' '), keyEl(p.signer)]))) : null,
    section('Members', d.member_list.length ? membersTable(d.member_list, t) : empty('Nobody has joined.')),
    section('Recent rounds', d.rounds.length ? roundsTable(d.rounds) : empty('No round stored.'),
      witnessTable(d.rounds)),
    section('Phase timeline', d.timeline.length
      ? el('ol', { class: 'timeline', id: 'timeline' }, d.timeline.slice().reverse().map((p) => el('li', {},
        timeEl(p.time), ' ', badge(p.from), ' → ', badge(p.to), el('span', { class: 'muted' }, ` epoch ${p.epoch}, step ${p.step}`))))
      : empty('No phase change seen yet.')),
    section('Verification', verification(d.verification)),
    t ? section('Treasurer', facts([
      ['Balance', tokens(t.balance, t.decimals)], ['Reserved', tokens(t.reserved_tokens, t.decimals)],
      ['Withdrawable', tokens(t.withdrawable, t.decimals)], ['Points claimed', num(t.total_claimed_points)],
      ['Points to claim', num(t.reserve.claims)], ['Unvested points', num(t.reserve.unvested)],
      ['Burned pending', num(t.reserve.burned)], ['Settled, unclaimed', num(t.reserve.settled)],
      ['Deposits held', tokens(t.total_deposits, t.decimals)], ['Join deposit', tokens(t.join_deposit, t.decimals)],
      ['Earning rate / epoch', num(t.funding.earning_rate)], ['Epochs funded', t.funding.epochs_funded === null ? dash : num(t.funding.epochs_funded)],
      ['Token account', keyEl(t.token_account)], ['Mint', keyEl(t.mint)], ['Closed', t.closed ? 'yes' : 'no'],
    ])) : null,
    section('Events', d.events.length ? table('events', [['When'], ['Event'], ['What', 0, 'wrap']],
      d.events.slice().reverse().map((e) => [timeEl(e.time), memberHit.has(e.name) ? el('span', { class: 'bad' }, e.name) : e.name, withKeys(e.text)]))
      : empty('No membership, verification or epoch event seen yet.')),
  ));
}

// Events that cost a member its place in the epoch and points.
const memberHit = new Set(['MemberFaulted', 'ClientDropped']);

function evalSeries(evals) {
  const byTask = new Map();
  for (const e of evals) {
    if (!byTask.has(e.task)) byTask.set(e.task, new Map());
    const steps = byTask.get(e.task);
    steps.set(e.step, [...(steps.get(e.step) || []), e.acc_norm]); // several clients may score a step
  }
  return [...byTask].map(([task, steps]) => ({
    name: task,
    points: [...steps].map(([s, v]) => [s, v.reduce((a, b) => a + b, 0) / v.length]).sort((a, b) => a[0] - b[0]),
  }));
}

function membersTable(members, t) {
  const cols = [['#', 1], ['Signer'], ['State'], ['Earned', 1], ['Slashed', 1], ['Unvested', 1], ['Burned', 1], ['Faults']];
  if (t) cols.push(['Claimed', 1], ['Claimable', 1], ['Deposit', 1]);
  return table('members', cols, members.map((m) => {
    const row = [m.index === null ? dash : m.index, keyEl(m.signer), badge(m.state), num(m.earned), num(m.slashed), num(m.unvested),
      num(m.burned), (m.has_fault ? 'at fault' : '') + (m.open_disputes ? ` ${m.open_disputes} open dispute(s)` : '') || dash];
    if (t) row.push(num(m.claimed), num(m.claimable), tokens(m.deposit, t.decimals));
    return row;
  }));
}

function roundsTable(rounds) {
  return table('rounds', [['Step', 1], ['Height', 1], ['Clients', 1], ['Batch', 1], ['Inner steps', 1], ['Witnesses', 1], ['Loss', 1], ['Tokens/s', 1]],
    rounds.map((r) => {
      const losses = r.witnesses.map((w) => w.loss).filter(finite);
      const tps = r.witnesses.filter((w) => w.loss !== null).map((w) => w.tokens_per_sec);
      return [(r.current ? '▶ ' : '') + r.step, r.height, r.clients, r.batch_size, r.inner_steps, `${r.witnesses_reported}/${r.witnesses_elected}`,
        losses.length ? fixed(losses.reduce((a, b) => a + b, 0) / losses.length, 4) : dash,
        tps.length ? human(tps.reduce((a, b) => a + b, 0) / tps.length, ['', 'k', 'M']) : dash];
    }));
}

function witnessTable(rounds) {
  const rows = rounds.flatMap((r) => r.witnesses.map((w) => [r.step, w.index, keyEl(w.signer),
    w.participants === null ? dash : `${w.participants}/${r.clients}`, fixed(w.loss, 4), num(w.tokens_per_sec),
    w.signature ? keyEl(w.signature) : dash]));
  return rows.length ? table('witnesses', [['Step', 1], ['Index', 1], ['Witness'], ['Participants', 1], ['Loss', 1], ['Tokens/s', 1],
    ['Transaction']], rows) : null;
}

function verification(v) {
  if (!v) return empty('Unknown until the run is read.');
  const out = [facts([['Sampled', v.percent + '% of contributions'], ['Disputes opened', num(v.disputes_opened)],
    ['Forgiven per epoch', num(v.forgive_per_epoch)], ['Vesting epochs', num(v.vesting_epochs)]])];
  const commits = v.rounds.flatMap((r) => r.members.filter((m) => m.committed).map((m) => [r.step, m.index, keyEl(m.signer),
    m.must_verify ? 'yes' : 'no', m.verifier === null ? dash : m.verifier, m.verdict, keyEl(m.payload)]));
  out.push(commits.length ? table('commitments', [['Step', 1], ['Member', 1], ['Signer'], ['Sampled'], ['Verifier', 1], ['Verdict'], ['Payload']], commits)
    : empty(v.percent ? 'No commitment in the stored rounds.' : 'This run does not verify training.'));
  if (v.disputes.length) {
    out.push(table('disputes', [['Id', 1], ['Step', 1], ['State'], ['Kind'], ['Trainer'], ['Accuser'], ['Committee votes']],
      v.disputes.map((d) => [d.id, d.step, d.state, d.kind, keyEl(d.trainer), keyEl(d.accuser), d.committee.map((m) => m.vote).join(', ') || dash])));
  }
  return out;
}

// Competitions (the Competition program): the list, and a competition's
// settings, pool, current round, entries, rounds with their weights and
// payouts, curves, validators, faults and events.

const pct = (v) => (finite(v) ? (v * 100).toFixed(1) + '%' : dash);
const ppm = (v) => (finite(v) ? +(v / 1e4).toFixed(4) + '%' : dash);
const hexEl = (h) => (h ? el('code', { title: h }, h.length > 12 ? h.slice(0, 8) + '…' : h) : dash);
const yesNo = (b) => (b === undefined || b === null ? dash : b ? 'yes' : 'no');

function renderCompetitions(list) {
  document.title = 'Competitions · Psyche run explorer';
  const rows = list.competitions.map((c) => [
    el('a', { href: '/competitions/' + encodeURIComponent(c.id) }, c.id),
    [badge(c.phase || 'unread'), c.paused ? [' ', badge('paused')] : null, c.closed ? [' ', badge('closed')] : null],
    num(c.round), num(c.entries), num(c.validators), c.pool_balance === null ? dash : num(c.pool_balance), activity(c.last_activity)]);
  app.replaceChildren(el('div', { id: 'competitions-view' }, el('h1', {}, 'Competitions'),
    rows.length ? table('competitions', [['Competition'], ['Phase'], ['Round', 1], ['Entries', 1], ['Validators', 1], ['Pool', 1],
      ['Last activity']], rows) : empty('No competitions on this cluster.')));
}

// entryName is an entry's label in the rounds table and the curves.
const entryName = (entries, i) => '#' + i + (entries[i] ? ' ' + short(entries[i].miner) : '');

function renderCompetition(d) {
  document.title = d.id + ' · competition · Psyche run explorer';
  const r = d.round, p = d.pool, entries = d.entries;
  const finals = d.rounds.filter((x) => x.weights);
  app.replaceChildren(el('div', { id: 'competition-view' },
    el('h1', {}, d.id, ' ', badge(r.phase), d.paused ? [' ', badge('paused')] : null, d.closed ? [' ', badge('closed')] : null),
    d.read_error ? el('p', { class: 'error' }, d.read_error) : null,
    facts([
      ['Model', d.architecture ? `${d.architecture}, at most ${params(d.max_params)} parameters` : dash], ['Sequence length', num(d.seq_len)],
      ['Precision', d.precision || dash], ['Dataset root', hexEl(d.data_root)], ['Dataset location', d.data_location || dash],
      ['Sequences per page', num(d.sequences_per_page)],
      ['Epsilon', d.epsilon_start_ppm === d.epsilon_end_ppm ? ppm(d.epsilon_start_ppm)
        : `${ppm(d.epsilon_start_ppm)} → ${ppm(d.epsilon_end_ppm)} over ${num(d.epsilon_decay_slots)} slots`],
      ['Pages per round', num(d.pages_per_round)], ['Temperature', fixed(d.temperature, 3)], ['Round slots', num(d.round_slots)],
      ['Quorum', num(d.quorum)], ['Validators', d.permissioned ? 'permissioned' : 'anyone'], ['Validator stake', num(d.validator_stake)],
      ['Authority', keyEl(d.authority)], ['Created at slot', num(d.created_slot)], ['Last activity', activity(d.last_activity)],
    ]),
    section('Reward pool', p ? facts([
      ['Balance', num(p.balance)], ['Reward per round', num(p.reward_per_round)], ['Owed to miners', num(p.unclaimed)],
      ['Stakes', num(p.stakes)], ['Forfeited, to burn', num(p.forfeited)], ['Withdrawable', num(p.withdrawable)],
      ['Paid in all', num(p.total_paid)], ['Burned in all', num(p.total_burned)], ['Mint', keyEl(p.mint)], ['Pool account', keyEl(p.account)],
    ]) : empty('This competition pays no rewards.')),
    section('Current round', r.number ? [facts([
      ['Round', num(r.number)], ['Phase', badge(r.phase)], ['Opened at slot', num(r.open_slot)],
      ['Seed', hexEl(r.seed)], ['Votes due by slot', r.deadline_slot ? num(r.deadline_slot) : dash],
      ['Eligible entries', r.eligible.length ? r.eligible.map((i) => '#' + i).join(' ') : dash], ['Pages', num(r.pages)],
      ['Quorum', num(r.quorum)], ['Paid', num(r.paid)],
    ]), r.votes.length ? table('round-votes', [['Validator'], ['Digest'], ['Agrees']],
      r.votes.map((v) => [keyEl(v.validator), hexEl(v.digest),
        v.agrees === undefined ? el('span', { class: 'muted' }, 'not final') : v.agrees ? 'yes' : el('span', { class: 'bad' }, 'no')]))
      : empty('No vote yet.')] : empty('No round opened yet.')),
    section('Entries', entries.length ? table('entries', [['#', 1], ['Miner'], ['Committed at slot', 1], ['Status'], ['Wins', 1], ['Weight', 1],
      ['Earned', 1], ['Claimed', 1], ['Claimable', 1], ['Repo'], ['Revision']],
    entries.map((e) => [e.index, keyEl(e.miner), num(e.slot), badge(e.excluded ? 'excluded' : 'active'), num(e.wins), pct(e.weight),
      num(e.earned), num(e.claimed), num(e.claimable), e.repo || dash, hexEl(e.revision)]))
      : empty('No submission yet.')),
    section('Weights and payouts over rounds'), el('div', { class: 'charts' },
      lineChart('weight-chart', 'Weight per entry (final rounds)', entrySeries(finals, entries, (x, i) => x.weights[i]), pct, 'round'),
      lineChart('payout-chart', 'Cumulative payouts per entry', cumulative(entrySeries(finals, entries, (x, i) => x.payouts[i])), (v) => human(v, ['', 'K', 'M', 'B', 'T']), 'round')),
    section('Rounds', d.rounds.length ? roundsHistory(d.rounds, entries) : empty('No round seen yet.')),
    section('Validators', d.validators.length ? table('validators', [['Validator'], ['Stake', 1], ['Status'], ['Votes', 1], ['Faults', 1]],
      d.validators.map((v) => [keyEl(v.key), num(v.stake), badge(v.status), num(v.votes), num(v.faults)]))
      : empty('No validator has joined.')),
    section('Faults', d.faults.length ? table('faults', [['When'], ['Round', 1], ['Validator'], ['Forfeited', 1]],
      d.faults.slice().reverse().map((f) => [timeEl(f.time), num(f.round), keyEl(f.validator), num(f.forfeited)]))
      : empty('No validator has been faulted.')),
    section('Events', d.events.length ? table('competition-events', [['When'], ['Event'], ['What', 0, 'wrap']],
      d.events.slice().reverse().map((e) => [timeEl(e.time), e.name === 'ValidatorFaulted' ? el('span', { class: 'bad' }, e.name) : e.name, withKeys(e.text)]))
      : empty('No submission, validator or claim event seen yet.')),
  ));
}

// entrySeries is, per entry, value(round, index) over the rounds that have it.
function entrySeries(rounds, entries, value) {
  const n = Math.max(entries.length, ...rounds.map((x) => x.weights.length));
  const out = [];
  for (let i = 0; i < n; i++) {
    const points = rounds.filter((x) => i < x.weights.length).map((x) => [x.number, value(x, i)]);
    if (points.length) out.push({ name: entryName(entries, i), points });
  }
  return out;
}

function cumulative(series) {
  return series.map((s) => {
    let sum = 0;
    return { name: s.name, points: s.points.map(([x, y]) => [x, (sum += y)]) };
  });
}

// roundsHistory is one row per round, newest first: its outcome, votes,
// pot, and per entry its wins · weight · payout.
function roundsHistory(rounds, entries) {
  const n = Math.max(entries.length, ...rounds.map((x) => (x.wins || []).length));
  const cols = [['Round', 1], ['Outcome'], ['Opened at slot', 1], ['Votes', 1], ['Paid', 1], ['Credited', 1], ['Temperature', 1]];
  for (let i = 0; i < n; i++) cols.push([entryName(entries, i)]);
  return [table('competition-rounds', cols, rounds.slice().reverse().map((x) => {
    const agreeing = x.votes.filter((v) => v.agrees).length;
    const row = [(x.current ? '▶ ' : '') + x.number, x.exact || !x.weights ? badge(x.outcome) : el('span', { title: x.note }, badge(x.outcome), ' ≈'),
      num(x.open_slot), x.outcome === 'final' ? `${agreeing} of ${x.votes.length} agree` : num(x.votes.length),
      x.outcome === 'final' ? num(x.paid) : dash, x.outcome === 'final' ? num(x.credited) : dash,
      x.temperature_ppm ? fixed(x.temperature_ppm / 1e6, 3) : dash];
    for (let i = 0; i < n; i++) {
      row.push(x.weights && i < x.weights.length
        ? `${x.wins[i]} · ${pct(x.weights[i])} · ${num(x.payouts[i])}`
        : x.eligible.includes(i) ? el('span', { class: 'muted' }, 'eligible') : dash);
    }
    return row;
  })), el('p', { class: 'muted note' }, 'Per entry: wins · weight · payout of each final round. ≈: the weights are rebuilt from part of the history (hover for why).')];
}

function until(t) {
  const s = Math.round(t - Date.now() / 1000);
  return s > 0 ? `in ${s} s` : 'due';
}

// Relative times move on without a new render.
setInterval(() => {
  for (const e of document.querySelectorAll('[data-ago]')) e.textContent = ago(+e.dataset.ago);
  for (const e of document.querySelectorAll('[data-until]')) e.textContent = until(+e.dataset.until);
}, 1000);

function gone(message) {
  setStatus(null, false);
  app.replaceChildren(el('h1', {}, 'Run closed'), el('p', { class: 'error' }, message), el('p', {}, el('a', { href: '/' }, 'All runs')));
}

function competitionGone(message) {
  setStatus(null, false);
  app.replaceChildren(el('h1', {}, 'Competition gone'), el('p', { class: 'error' }, message),
    el('p', {}, el('a', { href: '/competitions' }, 'All competitions')));
}

const m = location.pathname.match(/^\/runs\/([^/]+)$/);
const cm = location.pathname.match(/^\/competitions\/([^/]+)$/);
if (m) {
  follow('/api/runs/' + m[1] + '/stream', renderRun, gone);
} else if (cm) {
  follow('/api/competitions/' + cm[1] + '/stream', renderCompetition, competitionGone);
} else if (location.pathname === '/competitions') {
  follow('/api/stream/competitions', renderCompetitions, competitionGone);
} else {
  follow('/api/stream', renderRuns, gone);
}
