"""Arrays served by an Isthmus gateway, over HTTP: selections computed server-side come back as
numpy arrays, threshold queries as coordinates and values, metadata as a dict. Requests are
SigV4 presigned URLs (standard library only), so the same URLs can be shared with anyone who
should read them until they expire.

    import isthmus.remote as r
    gw = r.Gateway("http://gateway:9000", access_key, secret_key)
    block = gw.select("runs", "run1/vel.zarr", "[0:4634,100:132,200:232,0]")   # numpy
    hits = gw.where("runs", "run1/vel.zarr", "abs(value) > 0.5", limit=1000)     # dict
    info = gw.info("runs", "run1/vel.zarr")                                      # dict
    url = gw.presign("runs", "run1/vel.zarr", {"select": "[::200,::200,0]", "format": "npy"})
"""

import datetime
import hashlib
import hmac
import io
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from ._native import IsthmusError

__all__ = ["Gateway"]


def _quote(text, safe="-_.~"):
    return urllib.parse.quote(text, safe=safe)


class Gateway:
    """An Isthmus gateway (any endpoint serving the array service) and the keys to sign with."""

    def __init__(self, endpoint, access_key, secret_key, region="us-east-1", timeout=300, ca_bundle=None):
        """`ca_bundle`: a PEM file of the CA that signed an https gateway's certificate, or of its
        self-signed certificate itself (as curl's --cacert) [default: the system's roots]."""
        self.endpoint = endpoint.rstrip("/")
        self._tls = ssl.create_default_context(cafile=str(ca_bundle)) if ca_bundle is not None else None
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.timeout = timeout

    def presign(self, bucket, path, params, expires=3600):
        """A GET URL of `bucket/path` with `params`, valid for `expires` seconds (SigV4)."""
        url = urllib.parse.urlsplit(self.endpoint)
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        scope = f"{date}/{self.region}/s3/aws4_request"
        query = dict(params)
        query.update({
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Credential": f"{self.access_key}/{scope}",
            "X-Amz-Date": amz_date,
            "X-Amz-Expires": str(int(expires)),
            "X-Amz-SignedHeaders": "host",
        })
        canonical_query = "&".join(f"{_quote(k)}={_quote(str(v))}" for k, v in sorted(query.items()))
        canonical_uri = _quote(f"/{bucket}/{path.strip('/')}", safe="/-_.~")
        canonical = "\n".join(["GET", canonical_uri, canonical_query, f"host:{url.netloc}", "", "host", "UNSIGNED-PAYLOAD"])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (date, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return f"{self.endpoint}{canonical_uri}?{canonical_query}&X-Amz-Signature={signature}"

    def _get(self, bucket, path, params):
        try:
            with urllib.request.urlopen(self.presign(bucket, path, params), timeout=self.timeout,
                                        context=self._tls) as response:
                return response.read(), response.headers
        except urllib.error.HTTPError as err:
            body = err.read().decode(errors="replace")
            code = body.split("<Code>")[1].split("</Code>")[0] if "<Code>" in body else str(err.code)
            message = body.split("<Message>")[1].split("</Message>")[0] if "<Message>" in body else body
            raise IsthmusError(code, message) from None

    @staticmethod
    def _params(params, dataset):
        """`params` with the HDF5 dataset named, when `path` is an HDF5 file."""
        if dataset is not None:
            params["dataset"] = dataset
        return params

    def select(self, bucket, path, selection, dataset=None):
        """The selection (`[start:stop:step, index, ...]`) as a numpy array, computed by the
        gateway; `dataset` names the dataset when `path` is an HDF5 file."""
        data, _ = self._get(bucket, path, self._params({"select": selection, "format": "npy"}, dataset))
        return np.load(io.BytesIO(data), allow_pickle=False)

    def where(self, bucket, path, expr, selection="", limit=None, after=None, dataset=None):
        """One page of the elements matching `expr`: {"coordinates", "values", "count", "next"};
        pass `after=page["next"]` for the next page."""
        params = self._params({"where": expr}, dataset)
        if selection:
            params["select"] = selection
        if limit is not None:
            params["limit"] = str(limit)
        if after is not None:
            params["after"] = str(after)
        data, _ = self._get(bucket, path, params)
        return json.loads(data)

    def where_all(self, bucket, path, expr, selection="", limit=100_000, dataset=None):
        """Every match, page by page: (coordinates as an (n, ndim) array, values)."""
        coordinates, values, after = [], [], None
        while True:
            page = self.where(bucket, path, expr, selection, limit, after, dataset)
            coordinates.extend(page["coordinates"])
            values.extend(page["values"])
            if page["next"] is None:
                return np.array(coordinates, dtype=np.int64).reshape(len(values), -1), np.array(values)
            after = page["next"]

    def info(self, bucket, path, dataset=None):
        """Shape, data type, chunks, attributes, dimension names, coordinate variables; of an
        HDF5 file without `dataset`, its datasets and whether each is served in place."""
        data, _ = self._get(bucket, path, self._params({"array": ""}, dataset))
        return json.loads(data)
