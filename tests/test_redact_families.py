"""Secrets named by what surrounds them (issue 30, "nothing lost, nothing leaked").

Each family has no vendor prefix to go by: the secret is named by the URL path it sits in,
the call or tuple it is passed to, the key a base64 blob hides under, the command that
reads it from stdin or printed it on the line before, the YAML list or table column it
is in, the colour codes or line continuation that split it from its key. Every test draws
FAKE values from a seeded generator, several seeds a family, so the rules are checked on
the shape and not on one example; and each family has look-alikes that must survive.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from lexmem.capture.redact import redact

LOWER = string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
SEEDS = [11, 23, 37, 41, 59]
FRAGMENT = 8


class Gen:
    """Fresh fake values of each shape, from one seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def fake(self, alphabet: str, n: int) -> str:
        chars = [self.rng.choice(alphabet) for _ in range(n)]
        for i, pool in enumerate((string.ascii_lowercase, string.ascii_uppercase, string.digits)):
            allowed = sorted(set(pool) & set(alphabet))
            if allowed and n >= 8 and not set(chars) & set(pool):
                chars[(i * 7 + 3) % n] = self.rng.choice(allowed)
        return "".join(chars)

    def password(self, n: int = 14) -> str:
        core = self.fake(ALNUM, n - 2)
        return (
            core[: n // 2]
            + self.rng.choice("#%+-.@^_!*")
            + core[n // 2 :]
            + str(self.rng.randrange(10))
        )

    def word(self) -> str:
        return self.rng.choice(["alpha", "orders", "billing", "relay", "staging", "ci", "mail"])

    def ident(self) -> str:
        return self.rng.choice(["user_id", "tenant", "order_id", "job_id", "region", "day"])


def gone(secret: str, out: str, context: str = "") -> bool:
    """Neither the secret nor any 8-character fragment of it (outside ``context``) survives."""
    frags = {secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1)}
    return secret not in out and not any(f in out and f not in context for f in frags)


def check(text: str, secret: str, *keep: str) -> str:
    out = redact(text).text
    assert gone(secret, out, text.replace(secret, "\0")), out
    for k in keep:
        assert k in out, (k, out)
    assert redact(out).text == out  # idempotent
    return out


# --- a Telegram bot token in a URL path ------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_telegram_bot_token_in_a_url_path(seed: int) -> None:
    g = Gen(seed)
    token = f"{g.rng.randrange(10**8, 10**10)}:AA{g.fake(URLSAFE, 33)}"
    method = g.rng.choice(["getUpdates", "sendMessage", "getMe", "setWebhook"])
    for text in (
        f"curl https://api.telegram.org/bot{token}/{method}",
        f'requests.post(f"https://api.telegram.org/bot{token}/{method}", json=payload)',
        f"GET /bot{token}/{method}?offset=12 HTTP/1.1",
    ):
        check(text, token, "api.telegram.org/bot" if "api." in text else "/bot", f"/{method}")


# --- a password passed by position, or in a tuple ----------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_an_app_password_passed_by_position(seed: int) -> None:
    g = Gen(seed)
    app = " ".join(g.fake(LOWER, 4) for _ in range(4))
    pw = g.password()
    user = f"{g.word()}@example.com"
    check(f"server.login('{user}', '{app}')", app, user)
    check(f'smtp.login("{user}", "{pw}")', pw, user)
    check(f'session.auth = HTTPBasicAuth("{g.word()}", "{pw}")', pw, "HTTPBasicAuth(")
    check(f"imap.login(\n    '{user}',\n    '{app}',\n)", app, user)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_password_of_an_auth_tuple_goes_and_the_user_may_stay(seed: int) -> None:
    g = Gen(seed)
    pw, user = g.password(), g.word()
    out = check(f'requests.get(url, auth=("{user}", "{pw}"))', pw, f'auth=("{user}", "')
    assert out.endswith('"))')
    check(f"httpx.Client(auth=['{user}', '{pw}'], timeout=5)", pw, f"['{user}', '")
    check(f'client = Client(auth=(settings.user, "{pw}"))', pw, "settings.user")


@pytest.mark.parametrize("seed", SEEDS)
def test_the_second_argument_after_a_caught_first_one(seed: int) -> None:
    g = Gen(seed)
    sid, token = "AC" + g.fake(HEX, 32), g.fake(HEX, 32)
    check(f'client = Client("{sid}", "{token}")', token)
    check(f'client = Client(\n    "{sid}",\n    "{token}",\n)', token, "client = Client(\n")
    key_id, secret = "AK" + "IA" + g.fake(string.ascii_uppercase + "234567", 16), g.fake(B64, 40)
    out = check(f"s3 = Session('{key_id}',\n               '{secret}')", secret)
    assert "aws_secret_access_key" in out


# --- base64 of a private key, and long base64 under a secret-named key -------------------------


def _pem_b64(g: Gen, label: str) -> str:
    body = "\n".join(g.fake(B64, 64) for _ in range(6))
    pem = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"
    return base64.b64encode(pem.encode()).decode()


@pytest.mark.parametrize("seed", SEEDS)
def test_a_base64_pem_private_key(seed: int) -> None:
    g = Gen(seed)
    for label in ("RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"):
        blob = _pem_b64(g, label)
        kubeconfig = (
            "users:\n- name: admin\n  user:\n"
            f"    client-certificate-data: {_cert_b64(g)}\n"
            f"    client-key-data: {blob}\n"
        )
        check(kubeconfig, blob, "client-key-data: ", "client-certificate-data: LS0tLS1CRUdJTi")
        check(f'{{"tls.key": "{blob}"}}', blob)
        check(f"the key is {blob} (from the secret)", blob)


def _cert_b64(g: Gen) -> str:
    body = "\n".join(g.fake(B64, 64) for _ in range(4))
    pem = f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
    return base64.b64encode(pem.encode()).decode()


@pytest.mark.parametrize("seed", SEEDS)
def test_long_base64_under_a_key_that_names_a_secret(seed: int) -> None:
    g = Gen(seed)
    for name in ("client-key-data", "secret_b64_payload", "tokenBlob", "password-data", "psk_raw"):
        blob = base64.b64encode(g.rng.randbytes(g.rng.randrange(30, 90))).decode()
        check(f"  {name}: {blob}\n  other: 1", blob, name)


def test_base64_that_is_not_a_secret_stays() -> None:
    g = Gen(5)
    cert = _cert_b64(g)
    digest = base64.b64encode(g.rng.randbytes(32)).decode()
    for text in (
        f"    certificate-authority-data: {cert}",
        f"    client-certificate-data: {cert}",
        f'  "publicKeyData": "{digest}"',
        f"  key_fingerprint: {digest}",
        f"  integrity: sha512-{digest}",
    ):
        assert redact(text).text == text


# --- a secret piped into a command that reads stdin, a flag value with & ------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_secret_piped_to_a_command_that_reads_stdin(seed: int) -> None:
    g = Gen(seed)
    pw, tok = g.password(), "gh" + "o_" + g.fake(ALNUM, 36)
    check(f'echo "{pw}" | docker login ghcr.io -u {g.word()} --password-stdin', pw, "| docker")
    check(f"echo -n '{pw}' | helm registry login reg.example.com --password-stdin", pw)
    check(f"printf '%s' {pw} | podman login -u bot --password-stdin quay.io", pw)
    check(f"echo {tok} | gh auth login --with-token", tok)
    check(f'echo "deploy:{pw}" | sudo chpasswd', pw, "deploy:")
    check(f"echo '{pw}' | docker secret create db_password -", pw, "db_password")


@pytest.mark.parametrize(
    "text",
    [
        "echo $CR_PAT | docker login ghcr.io -u USERNAME --password-stdin",
        'echo "${{ secrets.GITHUB_TOKEN }}" | docker login ghcr.io -u x --password-stdin',
        "cat ~/my_password.txt | docker login --username foo --password-stdin",
        "echo hello | wc -c",
    ],
)
def test_stdin_look_alikes_stay(text: str) -> None:
    assert redact(text).text == text


@pytest.mark.parametrize("seed", SEEDS)
def test_a_flag_value_with_an_ampersand_inside_goes_whole(seed: int) -> None:
    g = Gen(seed)
    pw = g.fake(ALNUM, 4) + "&" + g.fake(ALNUM, 4)
    check(f"psql --password {pw} -h db.internal", pw, "-h db.internal")
    check(f"mytool --api-key {g.fake(ALNUM, 6)}&{g.fake(ALNUM, 6)} --verbose", "&", "--verbose")
    out = redact("deploy --token abc123XY && echo done").text
    assert out.endswith(" && echo done"), out  # && still ends the command


# --- a YAML list under a secret-named key, a Markdown table column -----------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_yaml_list_under_a_secret_named_key(seed: int) -> None:
    g = Gen(seed)
    toks = [g.fake(ALNUM, g.rng.randrange(20, 40)) for _ in range(3)]
    pw = g.password()
    name = g.rng.choice(["api_tokens", "apiKeys", "passwords", "client_secrets", "tokens"])
    text = (
        f"service:\n  {name}:\n"
        + "".join(f"    - {t}\n" for t in toks[:2])
        + f'    - "{toks[2]}"  # rotated\n'
        + f"  admin_passwords:\n  - {pw}\n  region: eu-west-1\n"
    )
    out = redact(text).text
    for s in [*toks, pw]:
        assert gone(s, out), out
    assert f"  {name}:\n    - [REDACTED:" in out and "  region: eu-west-1\n" in out
    assert redact(out).text == out


@pytest.mark.parametrize(
    "text",
    [
        "services:\n  db:\n    secrets:\n      - db_password\n      - api_key\n",
        "ssh_keys:\n  - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB3x me@laptop\n",
        "special_tokens:\n  - <pad>\n  - <eos>\n",
        "keys:\n  - id\n  - name\n  - created_at\n",
        "secrets:\n  - name: DB_PASSWORD\n    valueFrom: db\n",
    ],
)
def test_yaml_lists_that_only_name_secrets_stay(text: str) -> None:
    assert redact(text).text == text


@pytest.mark.parametrize("seed", SEEDS)
def test_a_markdown_table_with_a_secret_column(seed: int) -> None:
    g = Gen(seed)
    keys = [g.fake(ALNUM, g.rng.randrange(20, 40)) for _ in range(3)]
    pw = g.password()
    header = g.rng.choice(["api key", "API Key", "Token", "secret", "Client Secret"])
    text = (
        f"| service | {header} | owner |\n|---|:---:|---|\n"
        + "".join(f"| {g.word()} | {k} | {g.word()} |\n" for k in keys[:2])
        + f"| s3 | `{keys[2]}` | data |\n\nDone.\n"
        + f"Host | Password\n--- | ---\ndb1 | {pw}\n"
    )
    out = redact(text).text
    for s in [*keys, pw]:
        assert gone(s, out), out
    assert out.startswith(f"| service | {header} | owner |\n|---|:---:|---|\n| ")
    assert "| s3 | `[REDACTED:env_secret]` | data |" in out and "\n\nDone.\n" in out
    assert redact(out).text == out


@pytest.mark.parametrize(
    "text",
    [
        "| token | count |\n|---|---|\n| the | 4211 |\n| hello | 17 |\n",
        "| Endpoint | Auth | Notes |\n|---|---|---|\n| /users | OAuth2 | paged |\n",
        "| Setting | Password policy |\n|---|---|\n| min length | 12 characters |\n",
        "| name | key |\n|---|---|\n| orders | order_id |\n| users | email |\n",
    ],
)
def test_tables_without_secrets_stay(text: str) -> None:
    assert redact(text).text == text


# --- a line continued with a backslash, colour codes around a key or value ----------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_value_continued_on_the_next_line(seed: int) -> None:
    g = Gen(seed)
    a, b = g.fake(URLSAFE, 40), g.fake(URLSAFE, 40)
    out = check(f"export OPENAI_API_KEY=sk-proj-{a}\\\n{b}\necho ok", b, "export OPENAI_API_KEY=")
    assert a not in out and out.endswith("\necho ok")
    pw1, pw2 = g.password(8), g.password(10)
    check(f"DB_PASSWORD={pw1}\\\n  {pw2} ./migrate.sh", pw2, "./migrate.sh")


def test_a_command_laid_out_with_continuations_stays() -> None:
    text = "docker run --rm \\\n  -e LOG_LEVEL=info \\\n  -p 8080:8080 \\\n  ghcr.io/acme/api:1.4"
    assert redact(text).text == text


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("esc", ["\x1b", "\\e", "\\033", "\\x1b"])
def test_colour_codes_around_a_key_or_its_value(seed: int, esc: str) -> None:
    g = Gen(seed)
    value = g.fake(ALNUM, 32)
    name = g.rng.choice(["STRIPE_API_SECRET", "DB_PASSWORD", "GITHUB_TOKEN", "api_key"])
    text = f"{esc}[1;32m{name}{esc}[0m={esc}[33m{value}{esc}[0m\n{esc}[32mok{esc}[0m"
    out = check(text, value, f"{esc}[1;32m{name}{esc}[0m=", f"{esc}[32mok{esc}[0m")
    assert out.startswith(f"{esc}[1;32m{name}")
    text = f"{name}: {esc}[1m{value}{esc}[0m"
    check(text, value, f"{name}: ")


def test_coloured_output_without_secrets_stays() -> None:
    text = "\x1b[32mPASSED\x1b[0m tests/test_tokens.py::test_key_rotation \x1b[1m[100%]\x1b[0m"
    assert redact(text).text == text


# --- nmcli, and a command's printed output -------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_a_wifi_psk_as_nmcli_shows_it(seed: int) -> None:
    g = Gen(seed)
    psk = g.password(g.rng.randrange(10, 20))
    text = (
        f"802-11-wireless.ssid:                   {g.word()}-5G\n"
        "802-11-wireless-security.key-mgmt:      wpa-psk\n"
        f"802-11-wireless-security.psk:           {psk}\n"
        "802-11-wireless-security.psk-flags:     0 (none)\n"
    )
    check(text, psk, "key-mgmt:      wpa-psk", "psk-flags:     0 (none)")
    check(f'network={{\n    ssid="home"\n    psk="{psk}"\n}}', psk, 'ssid="home"')


@pytest.mark.parametrize("seed", SEEDS)
def test_the_output_of_a_command_that_prints_a_secret(seed: int) -> None:
    g = Gen(seed)
    pw, tok = g.password(), g.fake(URLSAFE, 40)
    field = g.rng.choice(["password", "api-token", "DB_PASSWORD", "secret"])
    for command, value in (
        ("$ echo $DB_PASSWORD", pw),
        ('dev@box:~/app$ echo "${STRIPE_SECRET_KEY}"', tok),
        ("$ printenv GITHUB_TOKEN", tok),
        (f"$ kubectl get secret db -o jsonpath='{{.data.{field}}}' | base64 -d", pw),
        (f'$ kubectl -n prod get secret api -o jsonpath="{{.data.{field}}}" | base64 --decode', pw),
        (f"$ vault kv get -field={field} secret/app/db", pw),
        ("$ gh auth token", tok),
        ("$ gcloud auth print-access-token", tok),
        (
            "$ aws secretsmanager get-secret-value --secret-id db --query SecretString --output text",
            pw,
        ),
        ("$ op read op://Private/db/password", pw),
        ("$ security find-generic-password -s db -w", pw),
    ):
        check(f"{command}\n{value}\n$ ls\nREADME.md\n", value, command, "\n$ ls\nREADME.md\n")


@pytest.mark.parametrize(
    "text",
    [
        "$ echo $HOME\n/home/priya\n",
        "$ echo $DB_PASSWORD\n\n$ ls\n",
        "$ echo $DB_PASSWORD\n$ ls\n",
        "$ echo $API_TOKEN > .token\nwritten\n",
        "$ kubectl get secret db -o jsonpath='{.data.username}' | base64 -d\nadmin_user7\n",
        "$ kubectl get secret db -o jsonpath='{.data.password}'\nerror: not found\n",
        'if [ -z "$DB_PASSWORD" ]; then\n  echo $DB_PASSWORD\nfi\n',
        "echo $GITHUB_TOKEN\ndone\n",
        "We echo the token back to the user.\nThen log in.\n",
    ],
)
def test_printed_look_alikes_stay(text: str) -> None:
    assert redact(text).text == text


# --- a template is not a secret ---------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_templated_cache_keys_stay(seed: int) -> None:
    g = Gen(seed)
    name = g.rng.choice(["cache_key", "lock_key", "redis_key", "session_key", "sig_key"])
    a, b, c = g.word(), g.ident(), g.rng.randrange(2, 40)
    for text in (
        'cache_key = f"user:{user_id}:profile:v3"',
        f'{name} = f"{a}:{{{b}}}:{g.word()}:v{c}"',
        f"{name} = f'{a}:{{{b}}}:{{{g.ident()}}}:v{c}'",
        f'{name} = "{a}:{{}}:{g.word()}:v{c}".format({b})',
        f'{name} = "{a}:%s:{g.word()}:v{c}" % {b}',
        f'cache_key: "{a}:{{{b}}}:{g.word()}:v{c}"',
    ):
        assert redact(text).text == text, text


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_value_with_a_template_piece_is_still_a_secret(seed: int) -> None:
    g = Gen(seed)
    sig = g.fake(ALNUM, 32)
    check(f'signature = f"{sig}:{{nonce}}"', sig)
    check(f'session_key = "{sig}"', sig)


# --- a command that prints a secret, its output apart (an agent's Bash tool call) ----------


@pytest.mark.parametrize(
    ("command", "prints"),
    [
        ("echo $DB_PASSWORD", True),
        ('cd app && echo "$STRIPE_SECRET_KEY"', True),
        ("kubectl get secret db -o jsonpath='{.data.password}' | base64 -d", True),
        ("git status; printenv OPENAI_API_KEY", True),
        ("ls\nvault kv get -field=password secret/db", True),
        ("gh auth token", True),
        ("echo $HOME", False),
        ("echo $DB_PASSWORD > .env", False),
        ("kubectl get pods", False),
        ("printenv PATH", False),
        ("", False),
    ],
)
def test_a_command_that_prints_a_secret_is_known_apart_from_its_output(
    command: str, prints: bool
) -> None:
    from lexmem.capture.redact import prints_secret

    assert prints_secret(command) is prints
