// Isthmus console: a small single-page client of the gateway's own S3 API on the same origin.
// It signs every request in the browser (SigV4 with an unsigned payload, or a bearer token),
// so the gateway treats the console exactly like any other S3 client of the user who logged in:
// the same authorization, identities and quotas. The credentials live in this tab's
// sessionStorage only. SHA-256 and HMAC are implemented here because crypto.subtle exists only
// in secure contexts (HTTPS or localhost), and a site may serve plain HTTP inside its network.
'use strict';

(function () {
  const REGION = 'us-east-1';
  const SINGLE_PUT_LIMIT = 16 * 1024 * 1024; // larger files go up in parts
  const PART_SIZE = 8 * 1024 * 1024;
  const enc = new TextEncoder();
  const $ = (id) => document.getElementById(id);

  // ---- SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) over bytes.
  const K = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);

  function sha256(data) {
    const bitLength = data.length * 8;
    const padded = new Uint8Array(((data.length + 9 + 63) >> 6) << 6);
    padded.set(data);
    padded[data.length] = 0x80;
    const view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(bitLength / 0x100000000));
    view.setUint32(padded.length - 4, bitLength >>> 0);
    const h = new Uint32Array([
      0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    ]);
    const w = new Uint32Array(64);
    const rotr = (x, n) => (x >>> n) | (x << (32 - n));
    for (let offset = 0; offset < padded.length; offset += 64) {
      for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
      for (let i = 16; i < 64; i++) {
        const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
      }
      let [a, b, c, d, e, f, g, hh] = h;
      for (let i = 0; i < 64; i++) {
        const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
        const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
        hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
      }
      h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
    const out = new Uint8Array(32);
    const outView = new DataView(out.buffer);
    h.forEach((word, i) => outView.setUint32(i * 4, word));
    return out;
  }

  function hmac(key, message) {
    const block = new Uint8Array(64);
    block.set(key.length > 64 ? sha256(key) : key);
    const inner = new Uint8Array(64 + message.length);
    const outer = new Uint8Array(64 + 32);
    for (let i = 0; i < 64; i++) {
      inner[i] = block[i] ^ 0x36;
      outer[i] = block[i] ^ 0x5c;
    }
    inner.set(message, 64);
    outer.set(sha256(inner), 64);
    return sha256(outer);
  }

  const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

  // ---- Signature Version 4 (header and query forms), payload unsigned.
  function uriEncode(text, keepSlash) {
    let out = encodeURIComponent(text).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
    if (keepSlash) out = out.replace(/%2F/g, '/');
    return out;
  }

  function objectPath(bucket, key) {
    return '/' + uriEncode(bucket, false) + (key === undefined ? '' : '/' + uriEncode(key, true));
  }

  function canonicalQuery(params) {
    return Object.keys(params)
      .map((k) => [uriEncode(k, false), uriEncode(String(params[k]), false)])
      .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))
      .map(([k, v]) => k + '=' + v)
      .join('&');
  }

  function timestamps() {
    const iso = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
    return { amz: iso, date: iso.slice(0, 8) };
  }

  function signature(credentials, date, stringToSign) {
    let key = hmac(enc.encode('AWS4' + credentials.secretKey), enc.encode(date));
    for (const part of [REGION, 's3', 'aws4_request']) key = hmac(key, enc.encode(part));
    return hex(hmac(key, enc.encode(stringToSign)));
  }

  function signHeaders(credentials, method, path, params) {
    const t = timestamps();
    const headers = { host: location.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-date': t.amz };
    const names = Object.keys(headers).sort();
    const canonical = [
      method, path, canonicalQuery(params),
      names.map((n) => n + ':' + headers[n] + '\n').join(''), names.join(';'), 'UNSIGNED-PAYLOAD',
    ].join('\n');
    const scope = `${t.date}/${REGION}/s3/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', t.amz, scope, hex(sha256(enc.encode(canonical)))].join('\n');
    delete headers.host; // the browser sends it
    headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKey}/${scope}, ` +
      `SignedHeaders=${names.join(';')}, Signature=${signature(credentials, t.date, toSign)}`;
    return headers;
  }

  function presign(credentials, path, extra, seconds) {
    const t = timestamps();
    const params = Object.assign({}, extra, {
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': `${credentials.accessKey}/${t.date}/${REGION}/s3/aws4_request`,
      'X-Amz-Date': t.amz,
      'X-Amz-Expires': String(seconds),
      'X-Amz-SignedHeaders': 'host',
    });
    const canonical = ['GET', path, canonicalQuery(params), 'host:' + location.host + '\n', 'host', 'UNSIGNED-PAYLOAD'].join('\n');
    const scope = `${t.date}/${REGION}/s3/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', t.amz, scope, hex(sha256(enc.encode(canonical)))].join('\n');
    params['X-Amz-Signature'] = signature(credentials, t.date, toSign);
    return location.origin + path + '?' + canonicalQuery(params);
  }

  // ---- Session and requests.
  let session = null; // { accessKey, secretKey } or { token }

  function authHeaders(method, path, params) {
    if (session.token) return { authorization: 'Bearer ' + session.token };
    return signHeaders(session, method, path, params);
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

  async function s3(method, path, { params = {}, body = null, headers = {} } = {}) {
    const all = Object.assign(authHeaders(method, path, params), headers);
    // Reads bypass the browser's cache (a listing must be current). Not writes: `no-store` adds a
    // Cache-Control request header, which S3 stores as the object's own Cache-Control.
    const cache = method === 'GET' || method === 'HEAD' ? 'no-store' : 'default';
    const response = await fetch(urlOf(path, params), { method, headers: all, body, cache });
    if (!response.ok) throw await failure(response.status, await response.text());
    return response;
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
        else reject(await failure(xhr.status, xhr.responseText));
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
  // a token may list only beneath them, so a bucket opens at its first scoped path.
  function tokenPaths() {
    try {
      const payload = session.token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
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
    const scoped = session.token ? tokenPaths().find((p) => p.bucket === name) : null;
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
        button('Download', `Download ${name}`, () => download(bucket, key).catch(fail)),
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
    const a = document.createElement('a');
    a.download = name;
    if (session.token) {
      // A token cannot be put in a link: fetch the bytes (held in memory by the browser).
      const blob = await (await s3('GET', objectPath(bucket, key))).blob();
      a.href = URL.createObjectURL(blob);
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    } else {
      const disposition = `attachment; filename*=UTF-8''${uriEncode(name, false)}`;
      a.href = presign(session, objectPath(bucket, key), { 'response-content-disposition': disposition }, 300);
    }
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
    if (session.token) {
      say('Share links are signed with access keys; log in with keys to make one.', true);
      return;
    }
    shareTarget = objectPath(bucket, key);
    $('share-url').value = '';
    $('share-title').textContent = `Share ${key}`;
    $('share-dialog').showModal();
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
      for (let start = 0, number = 1; start < file.size; start += PART_SIZE, number++) {
        const slice = file.slice(start, Math.min(start + PART_SIZE, file.size));
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
    $('who').textContent = session ? (session.token ? 'Signed in with a token' : `Signed in as ${session.accessKey}`) : '';
  }

  document.addEventListener('DOMContentLoaded', () => {
    loadSession();
    for (const radio of document.querySelectorAll('input[name=method]')) {
      radio.addEventListener('change', () => {
        const token = $('method-token').checked;
        $('keys-fields').hidden = token;
        $('token-fields').hidden = !token;
      });
    }
    $('login-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      session = $('method-token').checked
        ? { token: $('token').value.trim() }
        : { accessKey: $('access-key').value.trim(), secretKey: $('secret-key').value };
      try {
        await s3('GET', '/');
        sessionStorage.setItem('isthmus-console', JSON.stringify(session));
        $('secret-key').value = '';
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
      sessionStorage.removeItem('isthmus-console');
      session = null;
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
    $('share-form').addEventListener('submit', (e) => {
      e.preventDefault();
      $('share-url').value = presign(session, shareTarget, {}, Number($('share-expiry').value));
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
  });
})();
