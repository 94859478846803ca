// Isthmus console: a small single-page client of the gateway's own S3 API on the same origin.
// It signs every request in the browser (SigV4 with an unsigned payload, or a bearer token),
// so the gateway treats the console exactly like any other S3 client of the user who logged in:
// the same authorization, identities and quotas. The credentials live in this tab's
// sessionStorage only. Signing is sigv4.js's.
'use strict';

(function () {
  const SINGLE_PUT_LIMIT = 16 * 1024 * 1024; // larger files go up in parts
  const PART_SIZE = 8 * 1024 * 1024; // grown for files over 80 GB: S3 allows 10,000 parts
  const MAX_PARTS = 10000;
  const $ = (id) => document.getElementById(id);

  const { uriEncode, objectPath, canonicalQuery, signHeaders, presign } = window.IsthmusSigV4;

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
