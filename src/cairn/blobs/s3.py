"""Blobs in an S3-compatible object store (AWS S3, MinIO, Ceph, R2...), through boto3.

    Engine(blobs="s3://bucket/prefix")

The bucket must exist. Credentials, region and endpoint come from boto3's usual places
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, ~/.aws), and
AWS_ENDPOINT_URL (or `?endpoint=http://host:9000` on the URL) names a store other than
AWS's. A blob is the object `<prefix>/<sha[:2]>/<sha>`; a PUT is atomic and durable
when it returns, so a crash leaves the whole object or none. Needs the `s3` extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cairn.blobs.stores import BlobStoreRefused
from cairn.errors import ConfigError

REFUSALS = frozenset(
    {
        "AccessDenied",
        "AccountProblem",
        "AllAccessDisabled",
        "ExpiredToken",
        "InvalidAccessKeyId",
        "InvalidBucketName",
        "InvalidObjectState",
        "InvalidSecurity",
        "InvalidToken",
        "MethodNotAllowed",
        "NoSuchBucket",
        "NotSignedUp",
        "SignatureDoesNotMatch",
        "TokenRefreshRequired",
        "UnauthorizedAccess",
    }
)
"""Error codes of a PUT that fail the same way until someone fixes the store's setup."""
THROTTLING = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded"})
"""Codes that say "later", whatever their HTTP status (some servers throttle with a 403)."""
CREDENTIAL_ERRORS = frozenset(
    {"NoCredentialsError", "PartialCredentialsError", "NoRegionError", "InvalidRegionError"}
)
"""botocore errors raised before any request: no credentials, none complete, no region."""


class S3Blobs:
    """Blobs as objects of one bucket, under one prefix."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client
        self.where = f"s3://{bucket}/{self.prefix}"

    @classmethod
    def from_url(cls, url: str, *, what: str = "blobs") -> S3Blobs:
        """The store `s3://bucket/prefix[?endpoint=URL]` names; ConfigError if it cannot be."""
        parts = urlsplit(url)
        if not parts.netloc:
            raise ConfigError(f"{what} {url!r} must name a bucket: s3://bucket/prefix")
        try:
            import boto3
        except ImportError:
            raise ConfigError(
                f"{what} {url!r} needs the s3 extra: pip install 'cairn-workflows[s3]'"
            ) from None
        endpoint = parse_qs(parts.query).get("endpoint", [None])[0]
        client = boto3.client("s3", endpoint_url=endpoint)
        return cls(parts.netloc, parts.path, client=client)

    def __repr__(self) -> str:
        return f"S3Blobs({self.where!r})"

    def key(self, sha256: str) -> str:
        """The object key of blob `sha256`."""
        tail = f"{sha256[:2]}/{sha256}"
        return f"{self.prefix}/{tail}" if self.prefix else tail

    def put(self, sha256: str, data: bytes) -> None:
        """PUT the object (again, if it is there: that marks it fresh for the prune).

        A PUT that may go through later (throttled, a 5xx, no connection) raises OSError,
        as a file store's failed write does: the caller's to wait out or report
        (blobs/offloaded.py). One the store will refuse until someone fixes it (bad
        credentials, no such bucket, access denied) raises BlobStoreRefused, naming the
        bucket and the error: waiting would only hide it.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key(sha256), Body=data)
        except (ClientError, BotoCoreError) as exc:
            raise self._failure(exc, "PUT", sha256) from exc

    def get(self, sha256: str) -> bytes | None:
        """The object's bytes, or None if there is no such object.

        A GET that may succeed later raises OSError, one refused until someone fixes the
        store BlobStoreRefused, as for `put`: never botocore's own error.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = self.client.get_object(Bucket=self.bucket, Key=self.key(sha256))
            data: bytes = found["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        except (ClientError, BotoCoreError) as exc:
            raise self._failure(exc, "GET", sha256) from exc
        return data

    def head(self, sha256: str, size: int) -> bytes | None:
        """The object's first `size` bytes (a ranged GET), or None if there is no such object.

        A GET that may succeed later raises OSError, one refused until someone fixes the
        store BlobStoreRefused, as for `put`.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            found = self.client.get_object(
                Bucket=self.bucket, Key=self.key(sha256), Range=f"bytes=0-{size - 1}"
            )
            data: bytes = found["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        except (ClientError, BotoCoreError) as exc:
            raise self._failure(exc, "GET", sha256) from exc
        return data

    def _failure(self, exc: Exception, verb: str, sha256: str) -> OSError:
        """What a request's botocore error `exc` is to the caller (see `put`)."""
        from botocore.exceptions import ClientError

        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in REFUSALS or (status == 403 and code not in THROTTLING):
                message = str(error.get("Message") or "").strip()
                return BlobStoreRefused(
                    f"bucket {self.bucket!r} refused {verb} {self.key(sha256)}: {code}"
                    + (f" ({message})" if message else "")
                )
            return OSError(f"{verb} {self.key(sha256)}: {exc}")
        if type(exc).__name__ in CREDENTIAL_ERRORS:
            return BlobStoreRefused(
                f"bucket {self.bucket!r}: cannot {verb} {self.key(sha256)}: "
                f"{type(exc).__name__}: {exc}"
            )
        return OSError(f"{verb} {self.key(sha256)}: {exc}")

    def listing(self) -> Iterator[tuple[str, float]]:
        """Every object under the prefix: its name and when it was last written."""
        pages = self.client.get_paginator("list_objects_v2")
        start = f"{self.prefix}/" if self.prefix else ""
        for page in pages.paginate(Bucket=self.bucket, Prefix=start):
            for item in page.get("Contents", ()):
                yield item["Key"].rsplit("/", 1)[-1], item["LastModified"].timestamp()

    def delete(self, sha256: str, *, written_before: float) -> None:
        """Delete the object unless it was written (or put again) since `written_before`."""
        try:
            found = self.client.head_object(Bucket=self.bucket, Key=self.key(sha256))
        except self.client.exceptions.ClientError:
            return  # gone already
        if found["LastModified"].timestamp() < written_before:
            self.client.delete_object(Bucket=self.bucket, Key=self.key(sha256))
