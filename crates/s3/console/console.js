// Isthmus console: a small single-page client of the gateway's S3 API, served on an address of
// its own that serves no object (so no object's script ever runs in this origin). Logging in
// exchanges the keys (or a bearer token) for temporary credentials (STS GetSessionToken, or
// AssumeRoleWithWebIdentity): only those are kept, in this tab's sessionStorage; the secret
// key and the token are never stored. Every request is signed in the browser with them (SigV4
// with an unsigned payload), so the gateway treats the console like any other S3 client of the
// user who logged in: the same authorization, identities and quotas. Downloads and share links
// point to the S3 address (`/config.json` says where). Signing is sigv4.js's.
'use strict';

(function () {
  const SINGLE_PUT_LIMIT = 16 * 1024 * 1024; // larger files go up in parts
  const PART_SIZE = 8 * 1024 * 1024; // grown for files over 80 GB: S3 allows 10,000 parts
  const MAX_PARTS = 10000;
  const SESSION_SECONDS = 8 * 3600; // a working day; a token's session ends with the token
  const STS_VERSION = '2011-06-15';
  const $ = (id) => document.getElementById(id);

  const { uriEncode, objectPath, canonicalQuery, signHeaders, presign } = window.IsthmusSigV4;

  // ---- Session and requests.
  // { accessKey, secretKey, sessionToken, expiresAt (ms), label, scopes? }: temporary credentials.
  let session = null;
  let s3Origin = null; // where objects are served: the S3 address, never this page's
  let configLoaded = null; // settles once s3Origin is known

  function authHeaders(method, path, params) {
    return signHeaders(session, method, path, params);
  }

  function secondsLeft() {
    return Math.floor((session.expiresAt - Date.now()) / 1000);
  }

  function urlOf(path, params) {
    const query = canonicalQuery(params);
    return path + (query ? '?' + query : '');
  }

  async function failure(status, text) {
    const doc = new DOMParser().parseFromString(text || '', 'application/xml');
    const code = doc.querySelector('Code')?.textContent;
    const message = doc.querySelector('Message')?.textContent;
    const error = new Error(message ? `${message} (${code})` : `The gateway answered ${status}`);
    error.code = code;
    return error;
  }

  // The session is over (expired, or its user's key removed or rotated): back to the login.
  const SESSION_ENDED = ['ExpiredToken', 'InvalidToken', 'InvalidAccessKeyId'];

  function sessionEnded() {
    endSession();
    const error = new Error('Your session has ended; log in again.');
    error.code = 'SessionEnded';
    return error;
  }

  async function s3(method, path, { params = {}, body = null, headers = {} } = {}) {
    if (secondsLeft() <= 0) throw sessionEnded();
    const all = Object.assign(authHeaders(method, path, params), headers);
    // Reads bypass the browser's cache (a listing must be current). Not writes: `no-store` adds a
    // Cache-Control request header, which S3 stores as the object's own Cache-Control.
    const cache = method === 'GET' || method === 'HEAD' ? 'no-store' : 'default';
    const response = await fetch(urlOf(path, params), { method, headers: all, body, cache });
    if (!response.ok) {
      const error = await failure(response.status, await response.text());
      throw SESSION_ENDED.includes(error.code) ? sessionEnded() : error;
    }
    return response;
  }

  // ---- Logging in: keys or a token become temporary credentials, and only those are kept.
  async function temporaryCredentials(response, label, scopes) {
    const text = await response.text();
    if (!response.ok) throw await failure(response.status, text);
    const doc = new DOMParser().parseFromString(text, 'application/xml');
    const field = (name) => doc.querySelector('Credentials > ' + name)?.textContent;
    return {
      accessKey: field('AccessKeyId'),
      secretKey: field('SecretAccessKey'),
      sessionToken: field('SessionToken'),
      expiresAt: Date.parse(field('Expiration')),
      label,
      scopes,
    };
  }

  async function sessionFromKeys(accessKey, secretKey) {
    const params = { Action: 'GetSessionToken', DurationSeconds: String(SESSION_SECONDS), Version: STS_VERSION };
    const headers = signHeaders({ accessKey, secretKey }, 'GET', '/', params);
    const response = await fetch(urlOf('/', params), { headers, cache: 'no-store' });
    return temporaryCredentials(response, `Signed in as ${accessKey}`, null);
  }

  async function sessionFromToken(token) {
    const form = new URLSearchParams({
      Action: 'AssumeRoleWithWebIdentity',
      WebIdentityToken: token,
      RoleSessionName: 'isthmus-console',
      DurationSeconds: String(SESSION_SECONDS),
      Version: STS_VERSION,
    });
    const response = await fetch('/', { method: 'POST', body: form, cache: 'no-store' });
    return temporaryCredentials(response, 'Signed in with a token', tokenPaths(token));
  }

  async function s3xml(method, path, options) {
    const response = await s3(method, path, options);
    return new DOMParser().parseFromString(await response.text(), 'application/xml');
  }

  // A PUT with upload progress (fetch reports none); resolves to the ETag.
  function putWithProgress(path, params, body, contentType, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', urlOf(path, params));
      const headers = authHeaders('PUT', path, params);
      for (const name of Object.keys(headers)) xhr.setRequestHeader(name, headers[name]);
      if (contentType) xhr.setRequestHeader('content-type', contentType);
      xhr.upload.onprogress = (e) => onProgress(e.loaded);
      xhr.onload = async () => {
        if (xhr.status >= 200 && xhr.status < 300) resolve(xhr.getResponseHeader('ETag'));
        else {
          const error = await failure(xhr.status, xhr.responseText);
          reject(SESSION_ENDED.includes(error.code) ? sessionEnded() : error);
        }
      };
      xhr.onerror = () => reject(new Error('The upload was cut off'));
      xhr.send(body);
    });
  }

  // ---- Messages.
  function say(text, isError) {
    const status = $('status');
    status.textContent = text;
    status.className = isError ? 'error' : '';
    status.setAttribute('role', isError ? 'alert' : 'status');
  }

  function fail(err) {
    say(err.message || String(err), true);
    if (err.code === 'SessionEnded') show('login-view');
  }

  // ---- Helpers for the tables.
  function humanSize(bytes) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit++;
    }
    return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
  }

  function cell(row, content) {
    const td = document.createElement('td');
    if (content instanceof Node) td.append(content);
    else td.textContent = content;
    row.append(td);
    return td;
  }

  function button(text, label, onClick, style) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.setAttribute('aria-label', label);
    b.className = style || 'quiet';
    b.addEventListener('click', onClick);
    return b;
  }

  function link(text, href) {
    const a = document.createElement('a');
    a.href = href;
    a.textContent = text;
    return a;
  }

  function show(view) {
    for (const id of ['login-view', 'buckets-view', 'objects-view']) $(id).hidden = id !== view;
    $('whoami').hidden = view === 'login-view';
  }

  // ---- Where we are: #/ (buckets) or #/b/BUCKET/PREFIX.
  function place() {
    const hash = decodeURIComponent(location.hash.replace(/^#/, ''));
    const match = hash.match(/^\/b\/([^/]+)\/?(.*)$/);
    return match ? { bucket: match[1], prefix: match[2] } : null;
  }

  function go(bucket, prefix) {
    location.hash = bucket === undefined ? '#/' : '#/b/' + encodeURIComponent(bucket) + '/' + encodeURIComponent(prefix || '');
  }

  let continuation = null;

  async function render() {
    if (!session) {
      show('login-view');
      return;
    }
    const where = place();
    try {
      if (where) await renderObjects(where.bucket, where.prefix, false);
      else await renderBuckets();
    } catch (err) {
      fail(err);
    }
  }

  // The paths a token's scopes name (WLCG `storage.read:/bucket/prefix`, SciTokens `read:/...`):
  // a token may list only beneath them, so a bucket opens at its first scoped path. Read once,
  // at login; the session keeps these paths, not the token.
  function tokenPaths(token) {
    try {
      const payload = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      const claims = JSON.parse(atob(payload + '='.repeat((4 - (payload.length % 4)) % 4)));
      return String(claims.scope || '').split(' ')
        .map((s) => s.match(/^[a-z.]+:\/([^/]+)\/?(.*)$/))
        .filter(Boolean)
        .map((m) => ({ bucket: m[1], prefix: m[2] ? m[2].replace(/\/?$/, '/') : '' }));
    } catch (_) {
      return [];
    }
  }

  function bucketLink(name) {
    const scoped = session.scopes ? session.scopes.find((p) => p.bucket === name) : null;
    return '#/b/' + encodeURIComponent(name) + '/' + encodeURIComponent(scoped ? scoped.prefix : '');
  }

  async function renderBuckets() {
    const doc = await s3xml('GET', '/');
    const body = $('buckets-table').tBodies[0];
    body.replaceChildren();
    for (const b of doc.querySelectorAll('Bucket')) {
      const name = b.querySelector('Name').textContent;
      const row = document.createElement('tr');
      cell(row, link(name, bucketLink(name)));
      cell(row, new Date(b.querySelector('CreationDate').textContent).toLocaleString());
      body.append(row);
    }
    if (!body.rows.length) {
      const row = document.createElement('tr');
      cell(row, 'No buckets yet.').colSpan = 2;
      body.append(row);
    }
    show('buckets-view');
    renderPools().catch(fail);
  }

  // ---- Pools: each erasure-coded pool's drives (state, healing progress, free space) and
  // quorums, from the gateway's status page, which answers the root user's session only (for
  // anyone else the section stays hidden). Refreshed while a drive heals.
  let poolsTimer = null;
  let poolsRefused = null; // the session the status page refused: not asked again

  async function renderPools() {
    clearTimeout(poolsTimer);
    const section = $('pools-section');
    if (poolsRefused === session.accessKey) {
      section.hidden = true;
      return;
    }
    let status;
    try {
      status = await (await s3('GET', '/', { params: { 'isthmus-admin': 'status' } })).json();
    } catch (err) {
      if (err.code === 'SessionEnded') throw err;
      if (err.code === 'AccessDenied') poolsRefused = session.accessKey;
      section.hidden = true;
      return;
    }
    const pools = (status.pools || []).filter((p) => p.kind === 'erasure' && p.status);
    const list = $('pools');
    list.replaceChildren();
    let healing = false;
    for (const pool of pools) list.append(poolView(pool.status, () => (healing = true)));
    section.hidden = pools.length === 0;
    if (healing && !$('buckets-view').hidden) poolsTimer = setTimeout(() => renderPools().catch(fail), 2000);
  }

  function quorumText(name, quorum, verb) {
    const met = quorum.met ? 'met' : 'NOT MET';
    return `${name} quorum ${met}: ${quorum.drives} drives ${verb}, ${quorum.needed} needed.`;
  }

  function poolView(status, onHealing) {
    const box = document.createElement('div');
    const title = document.createElement('h3');
    title.textContent = `Pool ${status.pool}: ${status.data}+${status.parity}`;
    const quorums = document.createElement('p');
    quorums.className = 'pool-quorums';
    for (const [name, quorum, verb] of [['Read', status.read_quorum, 'serve reads'], ['Write', status.write_quorum, 'take writes']]) {
      const span = document.createElement('span');
      span.textContent = quorumText(name, quorum, verb) + ' ';
      if (!quorum.met) span.className = 'not-met';
      quorums.append(span);
    }
    const table = document.createElement('table');
    const caption = document.createElement('caption');
    caption.className = 'visually-hidden';
    caption.textContent = `Drives of pool ${status.pool}`;
    const head = table.createTHead().insertRow();
    for (const name of ['Drive', 'State', 'Healing', 'Free', 'Size', 'Mean latency', 'Errors']) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = name;
      head.append(th);
    }
    table.prepend(caption);
    const body = table.createTBody();
    for (const drive of status.drives) {
      const row = body.insertRow();
      row.dataset.slot = drive.slot;
      cell(row, drive.path);
      cell(row, drive.slow ? `${drive.state} (slow)` : drive.state).className = `state-${drive.state}`;
      cell(row, healingView(drive.healing));
      if (drive.healing) onHealing();
      cell(row, drive.free_bytes == null ? '-' : humanSize(drive.free_bytes)).className = 'size';
      cell(row, drive.size_bytes == null ? '-' : humanSize(drive.size_bytes)).className = 'size';
      cell(row, drive.mean_latency_ms == null ? '-' : `${drive.mean_latency_ms.toFixed(3)} ms`);
      cell(row, String(drive.errors));
    }
    box.append(title, quorums, table);
    return box;
  }

  function healingView(healing) {
    if (!healing) return '';
    if (healing.percent == null) return `counting objects (${healing.objects_done} done)`;
    const span = document.createElement('span');
    const bar = document.createElement('progress');
    bar.max = 100;
    bar.value = healing.percent;
    bar.setAttribute('aria-label', `Healing: ${healing.percent} %`);
    span.append(bar, `${healing.percent} %, ${healing.objects_left} objects left`);
    return span;
  }

  async function renderObjects(bucket, prefix, more) {
    const params = { 'list-type': '2', delimiter: '/', prefix };
    if (more && continuation) params['continuation-token'] = continuation;
    const doc = await s3xml('GET', objectPath(bucket), { params });
    const body = $('objects-table').tBodies[0];
    if (!more) body.replaceChildren();
    $('objects-title').textContent = prefix ? `${bucket}/${prefix}` : bucket;
    renderCrumbs(bucket, prefix);
    for (const p of doc.querySelectorAll('CommonPrefixes > Prefix')) {
      const folder = p.textContent;
      const row = document.createElement('tr');
      cell(row, link(folder.slice(prefix.length), '#/b/' + encodeURIComponent(bucket) + '/' + encodeURIComponent(folder)));
      cell(row, 'folder');
      cell(row, '');
      cell(row, '');
      body.append(row);
    }
    for (const c of doc.querySelectorAll('Contents')) {
      const key = c.querySelector('Key').textContent;
      if (key === prefix) continue; // the folder's own marker object
      const name = key.slice(prefix.length);
      const size = Number(c.querySelector('Size').textContent);
      const row = document.createElement('tr');
      cell(row, name);
      const sizeCell = cell(row, humanSize(size));
      sizeCell.className = 'size';
      sizeCell.title = `${size} bytes`;
      cell(row, new Date(c.querySelector('LastModified').textContent).toLocaleString());
      const actions = cell(row, '');
      actions.append(
        button('Download', `Download ${name}`, () => configLoaded.then(() => download(bucket, key)).catch(fail)),
        button('Info', `Show metadata of ${name}`, () => info(bucket, key).catch(fail)),
        button('Share', `Make a share link for ${name}`, () => share(bucket, key)),
        button('Delete', `Delete ${name}`, () => remove(bucket, key).catch(fail), 'danger'),
      );
      body.append(row);
    }
    if (!body.rows.length) {
      const row = document.createElement('tr');
      cell(row, 'Empty.').colSpan = 4;
      body.append(row);
    }
    const truncated = doc.querySelector('IsTruncated')?.textContent === 'true';
    continuation = truncated ? doc.querySelector('NextContinuationToken')?.textContent : null;
    $('more').hidden = !truncated;
    show('objects-view');
  }

  function renderCrumbs(bucket, prefix) {
    const list = $('crumbs');
    list.replaceChildren();
    const item = (content) => {
      const li = document.createElement('li');
      li.append(content);
      list.append(li);
      return li;
    };
    item(link('Buckets', '#/'));
    item(link(bucket, '#/b/' + encodeURIComponent(bucket) + '/'));
    let path = '';
    for (const part of prefix.split('/').filter(Boolean)) {
      path += part + '/';
      item(link(part, '#/b/' + encodeURIComponent(bucket) + '/' + encodeURIComponent(path)));
    }
    list.lastChild.firstChild.setAttribute('aria-current', 'page');
  }

  // ---- Object actions.
  async function download(bucket, key) {
    const name = key.split('/').filter(Boolean).pop() || 'download';
    if (secondsLeft() <= 0) throw sessionEnded();
    // A link to the S3 address that the browser saves (attachment), never shows.
    const a = document.createElement('a');
    a.download = name;
    const disposition = `attachment; filename*=UTF-8''${uriEncode(name, false)}`;
    const seconds = Math.min(300, secondsLeft());
    a.href = presign(session, s3Origin, objectPath(bucket, key), { 'response-content-disposition': disposition }, seconds);
    document.body.append(a);
    a.click();
    a.remove();
    say(`Downloading ${name}`);
  }

  async function info(bucket, key) {
    const response = await s3('HEAD', objectPath(bucket, key));
    const body = $('info-table').tBodies[0];
    body.replaceChildren();
    const add = (name, value) => {
      const row = document.createElement('tr');
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = name;
      row.append(th);
      cell(row, value);
      body.append(row);
    };
    add('Key', key);
    for (const [name, value] of response.headers) {
      if (/^(content-|etag|last-modified|expires|cache-control|x-amz-meta-|x-amz-version-id|x-amz-storage-class|x-amz-tagging-count)/.test(name)) {
        add(name, value);
      }
    }
    $('info-title').textContent = key;
    $('info-dialog').showModal();
  }

  let shareTarget = null;

  function share(bucket, key) {
    shareTarget = objectPath(bucket, key);
    $('share-url').value = '';
    $('share-title').textContent = `Share ${key}`;
    const end = new Date(session.expiresAt).toLocaleString();
    $('share-note').textContent = `Links made here stop working when this session ends (${end}).`;
    $('share-dialog').showModal();
  }

  // ---- A bucket's CORS rules (cors.js converts between the JSON shown and the S3 XML).
  const { EXAMPLE: CORS_EXAMPLE, fromXml: corsFromXml, toXml: corsToXml } = window.IsthmusCors;

  async function openCors(bucket) {
    let rules;
    try {
      rules = corsFromXml(await s3xml('GET', objectPath(bucket), { params: { cors: '' } }));
      $('cors-title').textContent = `CORS rules of ${bucket}`;
    } catch (err) {
      if (err.code !== 'NoSuchCORSConfiguration') throw err;
      rules = CORS_EXAMPLE;
      $('cors-title').textContent = `CORS rules of ${bucket} (none yet: an example)`;
    }
    $('cors-rules').value = JSON.stringify(rules, null, 2);
    $('cors-error').textContent = '';
    $('cors-dialog').showModal();
    $('cors-rules').focus();
  }

  async function saveCors(bucket) {
    let body;
    try {
      body = corsToXml($('cors-rules').value);
    } catch (err) {
      $('cors-error').textContent = err.message;
      return;
    }
    try {
      await s3('PUT', objectPath(bucket), { params: { cors: '' }, body, headers: { 'content-type': 'application/xml' } });
    } catch (err) {
      $('cors-error').textContent = err.message;
      return;
    }
    $('cors-dialog').close();
    say(`Saved the CORS rules of ${bucket}`);
  }

  async function removeCors(bucket) {
    await s3('DELETE', objectPath(bucket), { params: { cors: '' } });
    $('cors-dialog').close();
    say(`Removed the CORS rules of ${bucket}`);
  }

  function confirmDelete(text) {
    return new Promise((resolve) => {
      const dialog = $('confirm-dialog');
      $('confirm-text').textContent = text;
      dialog.returnValue = '';
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
      $('confirm-ok').focus();
    });
  }

  async function remove(bucket, key) {
    if (!(await confirmDelete(`Delete ${key} from ${bucket}? This cannot be undone.`))) return;
    await s3('DELETE', objectPath(bucket, key));
    say(`Deleted ${key}`);
    await renderObjects(bucket, place()?.prefix || '', false);
  }

  // ---- Uploads.
  async function uploadOne(bucket, key, file, progress) {
    const path = objectPath(bucket, key);
    const type = file.type || 'application/octet-stream';
    if (file.size <= SINGLE_PUT_LIMIT) {
      await putWithProgress(path, {}, file, type, (n) => (progress.value = n));
      return;
    }
    const created = await s3xml('POST', path, { params: { uploads: '' }, headers: { 'content-type': type } });
    const uploadId = created.querySelector('UploadId').textContent;
    try {
      const parts = [];
      const partSize = Math.max(PART_SIZE, Math.ceil(file.size / MAX_PARTS / (1024 * 1024)) * 1024 * 1024);
      for (let start = 0, number = 1; start < file.size; start += partSize, number++) {
        const slice = file.slice(start, Math.min(start + partSize, file.size));
        const etag = await putWithProgress(path, { partNumber: String(number), uploadId }, slice, null, (n) => (progress.value = start + n));
        parts.push(`<Part><PartNumber>${number}</PartNumber><ETag>${etag}</ETag></Part>`);
      }
      const xml = `<CompleteMultipartUpload>${parts.join('')}</CompleteMultipartUpload>`;
      const done = await s3xml('POST', path, { params: { uploadId }, body: xml, headers: { 'content-type': 'application/xml' } });
      if (done.querySelector('Error')) throw new Error(done.querySelector('Message')?.textContent || 'The upload did not complete');
    } catch (err) {
      await s3('DELETE', path, { params: { uploadId } }).catch(() => {});
      throw err;
    }
  }

  async function upload(files) {
    const where = place();
    if (!where || !files.length) return;
    const list = $('uploads');
    let done = 0;
    for (const file of files) {
      const relative = file.webkitRelativePath || file.name;
      const key = where.prefix + relative;
      const item = document.createElement('li');
      const label = document.createElement('span');
      label.textContent = relative;
      const progress = document.createElement('progress');
      progress.max = Math.max(file.size, 1);
      progress.value = 0;
      progress.setAttribute('aria-label', `Upload of ${relative}`);
      item.append(label, progress);
      list.append(item);
      try {
        await uploadOne(where.bucket, key, file, progress);
        progress.value = progress.max;
        done++;
        item.remove();
      } catch (err) {
        label.textContent = `${relative}: ${err.message}`;
        fail(err);
        return;
      }
    }
    say(`Uploaded ${done} file${done === 1 ? '' : 's'}`);
    await renderObjects(where.bucket, where.prefix, false);
  }

  // ---- Wiring.
  function loadSession() {
    try {
      session = JSON.parse(sessionStorage.getItem('isthmus-console') || 'null');
    } catch (_) {
      session = null;
    }
    if (session && !(session.sessionToken && session.expiresAt > Date.now())) endSession();
    $('who').textContent = session ? session.label : '';
  }

  function endSession() {
    sessionStorage.removeItem('isthmus-console');
    session = null;
    $('who').textContent = '';
  }

  // Where the S3 address is: this page's host name, the S3 listener's scheme and port.
  async function loadConfig() {
    const config = await (await fetch('config.json', { cache: 'no-store' })).json();
    s3Origin = `${config.s3.scheme}://${location.hostname}:${config.s3.port}`;
  }

  document.addEventListener('DOMContentLoaded', () => {
    loadSession();
    configLoaded = loadConfig().catch((err) => {
      fail(new Error('The console cannot read its configuration (config.json): ' + err.message));
    });
    for (const radio of document.querySelectorAll('input[name=method]')) {
      radio.addEventListener('change', () => {
        const token = $('method-token').checked;
        $('keys-fields').hidden = token;
        $('token-fields').hidden = !token;
      });
    }
    $('login-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        session = $('method-token').checked
          ? await sessionFromToken($('token').value.trim())
          : await sessionFromKeys($('access-key').value.trim(), $('secret-key').value);
        $('secret-key').value = '';
        $('token').value = '';
        await s3('GET', '/');
        sessionStorage.setItem('isthmus-console', JSON.stringify(session));
        loadSession();
        say('Logged in');
        await render();
        $('buckets-title').focus();
      } catch (err) {
        session = null;
        fail(err);
      }
    });
    $('logout').addEventListener('click', () => {
      endSession();
      say('Logged out');
      location.hash = '#/';
      render();
    });
    $('new-bucket-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const name = $('new-bucket').value.trim();
      try {
        await s3('PUT', objectPath(name));
        $('new-bucket').value = '';
        say(`Created bucket ${name}`);
        go(name, '');
      } catch (err) {
        fail(err);
      }
    });
    $('new-folder-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const where = place();
      const name = $('new-folder').value.trim().replace(/\/+$/, '');
      try {
        await s3('PUT', objectPath(where.bucket, where.prefix + name + '/'), { body: '' });
        $('new-folder').value = '';
        say(`Created folder ${name}`);
        await renderObjects(where.bucket, where.prefix, false);
      } catch (err) {
        fail(err);
      }
    });
    $('delete-bucket').addEventListener('click', async () => {
      const where = place();
      if (!(await confirmDelete(`Delete bucket ${where.bucket}? It must be empty.`))) return;
      try {
        await s3('DELETE', objectPath(where.bucket));
        say(`Deleted bucket ${where.bucket}`);
        go();
      } catch (err) {
        fail(err);
      }
    });
    $('cors-open').addEventListener('click', () => openCors(place().bucket).catch(fail));
    $('cors-form').addEventListener('submit', (e) => {
      e.preventDefault();
      saveCors(place().bucket).catch(fail);
    });
    $('cors-remove').addEventListener('click', () => removeCors(place().bucket).catch(fail));
    $('cors-close').addEventListener('click', () => $('cors-dialog').close());
    for (const id of ['upload-files', 'upload-folder']) {
      $(id).addEventListener('change', (e) => {
        const files = Array.from(e.target.files);
        e.target.value = '';
        upload(files).catch(fail);
      });
    }
    $('more').addEventListener('click', () => {
      const where = place();
      renderObjects(where.bucket, where.prefix, true).catch(fail);
    });
    $('share-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      await configLoaded;
      // Temporary credentials sign the link: it cannot outlive the session.
      const wanted = $('share-expiry').value;
      const seconds = wanted === 'session' ? secondsLeft() : Math.min(Number(wanted), secondsLeft());
      if (seconds <= 0) {
        fail(sessionEnded());
        render();
        return;
      }
      $('share-url').value = presign(session, s3Origin, shareTarget, {}, seconds);
      $('share-url').focus();
      $('share-url').select();
    });
    $('share-copy').addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText($('share-url').value);
        say('Link copied');
      } catch (_) {
        $('share-url').select();
        say('Select the link and copy it');
      }
    });
    window.addEventListener('hashchange', () => {
      render().then(() => $(place() ? 'objects-title' : 'buckets-title').focus());
    });
    render();
    // Until now a press of Enter would have submitted the form to the page itself, keys in its URL.
    $('login').disabled = false;
  });
})();
