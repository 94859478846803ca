import pytest
"""The aws CLI with its default settings (CRC32 checksum trailers included)."""

import hashlib


@pytest.mark.posix_only
def test_mb_cp_ls_rm(aws, server, tmp_path):
    aws("s3", "mb", "s3://cli-bucket")
    src = tmp_path / "hello.txt"
    src.write_bytes(b"hello from the aws cli\n")
    aws("s3", "cp", str(src), "s3://cli-bucket/dir/hello.txt")
    assert (server.root / "cli-bucket/dir/hello.txt").read_bytes() == src.read_bytes()
    listing = aws("s3", "ls", "--recursive", "s3://cli-bucket").stdout
    assert "dir/hello.txt" in listing
    out = tmp_path / "back.txt"
    aws("s3", "cp", "s3://cli-bucket/dir/hello.txt", str(out))
    assert out.read_bytes() == src.read_bytes()
    aws("s3", "rm", "s3://cli-bucket/dir/hello.txt")
    assert "hello.txt" not in aws("s3", "ls", "--recursive", "s3://cli-bucket").stdout
    aws("s3", "rb", "s3://cli-bucket")
    assert not (server.root / "cli-bucket").exists()


@pytest.mark.posix_only
def test_cp_under_multipart_threshold_and_s3api(aws, server, tmp_path):
    aws("s3", "mb", "s3://cli2")
    data = bytes(range(256)) * 4096 * 7  # 7 MiB: one PUT with a streamed CRC32 trailer
    src = tmp_path / "seven.bin"
    src.write_bytes(data)
    aws("s3", "cp", str(src), "s3://cli2/seven.bin")
    assert hashlib.md5((server.root / "cli2/seven.bin").read_bytes()).hexdigest() == hashlib.md5(data).hexdigest()
    head = aws("s3api", "head-object", "--bucket", "cli2", "--key", "seven.bin").stdout
    assert hashlib.md5(data).hexdigest() in head
    # Sync a tree of its own: tmp_path also holds the live server's data root, whose temporary
    # files come and go while the CLI walks it.
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "seven.bin").write_bytes(data)
    aws("s3", "sync", str(tree), "s3://cli2/synced")
    assert (server.root / "cli2/synced/seven.bin").exists()
