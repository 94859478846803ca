// Isthmus console, request signing: SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and AWS
// Signature Version 4 in its header and query (presigned) forms, payload unsigned, with the
// session token of temporary credentials when there is one. Written here
// because crypto.subtle exists only in secure contexts (HTTPS or localhost), and a site may
// serve the console over plain HTTP inside its network.
'use strict';

window.IsthmusSigV4 = (function () {
  const REGION = 'us-east-1';
  const enc = new TextEncoder();

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

  // Headers for a request to this page's own origin.
  function signHeaders(credentials, method, path, params) {
    const t = timestamps();
    const headers = { host: location.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-date': t.amz };
    if (credentials.sessionToken) headers['x-amz-security-token'] = credentials.sessionToken;
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

  // A presigned GET of `path` on `origin` (the S3 address: objects are never served on the
  // console's own).
  function presign(credentials, origin, path, extra, seconds) {
    const t = timestamps();
    const params = Object.assign({}, extra, {
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': `${credentials.accessKey}/${t.date}/${REGION}/s3/aws4_request`,
      'X-Amz-Date': t.amz,
      'X-Amz-Expires': String(seconds),
      'X-Amz-SignedHeaders': 'host',
    });
    if (credentials.sessionToken) params['X-Amz-Security-Token'] = credentials.sessionToken;
    const host = new URL(origin).host;
    const canonical = ['GET', path, canonicalQuery(params), 'host:' + host + '\n', 'host', 'UNSIGNED-PAYLOAD'].join('\n');
    const scope = `${t.date}/${REGION}/s3/aws4_request`;
    const toSign = ['AWS4-HMAC-SHA256', t.amz, scope, hex(sha256(enc.encode(canonical)))].join('\n');
    params['X-Amz-Signature'] = signature(credentials, t.date, toSign);
    return origin + path + '?' + canonicalQuery(params);
  }

  return { uriEncode, objectPath, canonicalQuery, signHeaders, presign };
})();
