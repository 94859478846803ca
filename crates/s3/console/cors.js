// Isthmus console, a bucket's CORS rules: the JSON that `aws s3api put-bucket-cors
// --cors-configuration` takes ({"CORSRules": [{"AllowedOrigins": [...], ...}]}), read from and
// written as the S3 API's CORSConfiguration XML. The gateway checks the rules it is given (S3's
// limits and methods) and answers what is wrong; this only converts.
'use strict';

window.IsthmusCors = (function () {
  const LISTS = ['AllowedOrigins', 'AllowedMethods', 'AllowedHeaders', 'ExposeHeaders'];
  // Each list's element name in the XML: AllowedOrigins holds AllowedOrigin elements, etc.
  const ELEMENT = {
    AllowedOrigins: 'AllowedOrigin',
    AllowedMethods: 'AllowedMethod',
    AllowedHeaders: 'AllowedHeader',
    ExposeHeaders: 'ExposeHeader',
  };

  // What a bucket without rules shows: one rule a Zarr viewer on another origin needs.
  const EXAMPLE = {
    CORSRules: [
      {
        AllowedOrigins: ['https://viewer.example.org'],
        AllowedMethods: ['GET', 'HEAD'],
        AllowedHeaders: ['*'],
        ExposeHeaders: ['ETag', 'Content-Range'],
        MaxAgeSeconds: 3600,
      },
    ],
  };

  function escapeXml(text) {
    return String(text).replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
  }

  // The rules of a GetBucketCors answer, as JSON.
  function fromXml(doc) {
    const rules = [];
    for (const rule of doc.querySelectorAll('CORSRule')) {
      const out = {};
      const id = rule.querySelector('ID');
      if (id) out.ID = id.textContent;
      for (const list of LISTS) {
        const values = Array.from(rule.getElementsByTagName(ELEMENT[list]), (e) => e.textContent);
        if (values.length) out[list] = values;
      }
      const age = rule.querySelector('MaxAgeSeconds');
      if (age) out.MaxAgeSeconds = Number(age.textContent);
      rules.push(out);
    }
    return { CORSRules: rules };
  }

  // The PutBucketCors body for `text` (the JSON above); throws with a message a person can
  // act on when it is not that shape.
  function toXml(text) {
    let config;
    try {
      config = JSON.parse(text);
    } catch (err) {
      throw new Error(`The rules are not JSON: ${err.message}`);
    }
    const rules = config && config.CORSRules;
    if (!Array.isArray(rules) || !rules.length) {
      throw new Error('Give {"CORSRules": [ ... ]} with at least one rule (or remove all rules).');
    }
    const body = rules.map((rule, i) => {
      if (typeof rule !== 'object' || rule === null) throw new Error(`Rule ${i + 1} is not an object.`);
      const known = new Set(['ID', 'MaxAgeSeconds', ...LISTS]);
      const unknown = Object.keys(rule).filter((k) => !known.has(k));
      if (unknown.length) throw new Error(`Rule ${i + 1}: unknown field ${unknown[0]}.`);
      let xml = '<CORSRule>';
      if (rule.ID !== undefined) xml += `<ID>${escapeXml(rule.ID)}</ID>`;
      for (const list of LISTS) {
        const values = rule[list] === undefined ? [] : rule[list];
        if (!Array.isArray(values)) throw new Error(`Rule ${i + 1}: ${list} must be a list.`);
        xml += values.map((v) => `<${ELEMENT[list]}>${escapeXml(v)}</${ELEMENT[list]}>`).join('');
      }
      if (rule.MaxAgeSeconds !== undefined) {
        if (!Number.isInteger(rule.MaxAgeSeconds)) throw new Error(`Rule ${i + 1}: MaxAgeSeconds must be a whole number.`);
        xml += `<MaxAgeSeconds>${rule.MaxAgeSeconds}</MaxAgeSeconds>`;
      }
      return xml + '</CORSRule>';
    });
    return `<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${body.join('')}</CORSConfiguration>`;
  }

  return { EXAMPLE, fromXml, toXml };
})();
