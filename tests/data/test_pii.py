from collections import Counter

import pytest

from openafm.data.document import Document
from openafm.data.pipeline.pii import PiiStage, luhn_ok, scrub


def doc(text: str, *, id: str = "t:1", domain: str = "general", lang: str | None = None, **meta) -> Document:
    return Document(id=id, text=text, source="t", licence="test", domain=domain, lang=lang, meta=dict(meta))


@pytest.mark.parametrize("text, expected, kind", [
    ("Write to john.smith@example.co.uk today", "Write to <EMAIL> today", "EMAIL"),
    ("maint: Jörg <joerg+debian@lists.debian.org>", "maint: Jörg <<EMAIL>>", "EMAIL"),
    ("Call +44 20 7946 0958 now", "Call <PHONE> now", "PHONE"),
    ("Office: (202) 555-0143.", "Office: <PHONE>.", "PHONE"),
    ("cell 202.555.0143", "cell <PHONE>", "PHONE"),
    ("host 192.168.1.20 is up", "host <IP_ADDRESS> is up", "IP_ADDRESS"),
    ("link-local fe80::1ff:fe23:4567:890a and 2001:db8::1", "link-local <IP_ADDRESS> and <IP_ADDRESS>", "IP_ADDRESS"),
    ("card 4111 1111 1111 1111 exp", "card <CREDIT_CARD> exp", "CREDIT_CARD"),
    ("card 4539-1488-0343-6467.", "card <CREDIT_CARD>.", "CREDIT_CARD"),
    ("amex 378282246310005", "amex <CREDIT_CARD>", "CREDIT_CARD"),
])
def test_positives(text, expected, kind):
    out, counts = scrub(text)
    assert out == expected
    assert set(counts) == {kind}


@pytest.mark.parametrize("text", [
    "card 4111 1111 1111 1112 fails the Luhn check",
    "id 1000000000000008 passes Luhn but has no issuer prefix",
    "version 1.2.3.4.5 and 999.1.1.1 and 01.02.03.04",
    "on 2024-01-15 at 12:30:45",
    "ISBN 978-3-16-148410-0 and serial 1234567 and pi 3.14159",
    "std::vector<int> and a::b and dead::beef",
    "user@localhost and an @decorator",
    "extension 555-0143",
])
def test_near_misses_untouched(text):
    assert scrub(text) == (text, Counter())


def test_luhn():
    assert luhn_ok("79927398713") and not luhn_ok("79927398710")


def test_stage_counts_and_code_policy():
    stage, counts = PiiStage(), Counter()
    out = stage.process(doc("mail a@b.org or 10.0.0.1 or a@b.org"), counts)
    assert out.text == "mail <EMAIL> or <IP_ADDRESS> or <EMAIL>"
    assert out.meta["pii_replaced"] == {"EMAIL": 2, "IP_ADDRESS": 1}
    code = stage.process(doc('HOST = "127.0.0.1"  # by a@b.org', domain="code"), counts)
    assert code.text == 'HOST = "127.0.0.1"  # by <EMAIL>'
    clean = doc("nothing here")
    assert stage.process(clean, counts) is clean
    assert counts == Counter({"replaced:EMAIL": 3, "replaced:IP_ADDRESS": 1, "documents-changed": 2})
