"""Drives the node's web chat page in headless Chromium (playwright): two pages as two users
exchange messages, see the read mark and the typing indicator, and one reloads and catches up.

Usage: python3 webchat_test.py https://127.0.0.1:PORT [chromium-executable]
Exits non-zero (with the failing step) when a step does not happen within its deadline.
"""

import sys
import time

from playwright.sync_api import expect, sync_playwright

STEP_TIMEOUT_MS = 15_000


def sign_in(page, base, user):
    page.goto(base + "/")
    page.fill("#user", user)
    page.press("#user", "Enter")
    expect(page.locator("#me")).to_have_text(user, timeout=STEP_TIMEOUT_MS)
    expect(page.locator("body")).to_have_attribute("data-socket", "open", timeout=STEP_TIMEOUT_MS)


def open_chat(page, peer):
    page.fill("#peer", peer)
    page.press("#peer", "Enter")
    expect(page.locator("#text")).to_be_enabled(timeout=STEP_TIMEOUT_MS)


def send(page, text):
    page.fill("#text", text)
    page.press("#text", "Enter")


def message(page, text):
    return page.locator(".message", has=page.locator(".body", has_text=text))


def main():
    base = sys.argv[1].rstrip("/")
    executable = sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/chromium"
    started = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        alice_context = browser.new_context(ignore_https_errors=True)
        bob_context = browser.new_context(ignore_https_errors=True)
        alice = alice_context.new_page()
        bob = bob_context.new_page()
        for page, name in ((alice, "alice"), (bob, "bob")):
            page.on("console", lambda m, name=name: print(f"[{name} console] {m.type}: {m.text}"))

        step = "sign in"
        try:
            sign_in(alice, base, "alice")
            sign_in(bob, base, "bob")

            step = "alice opens the distinct conversation and sends"
            open_chat(alice, "bob")
            send(alice, "hello bob")
            expect(message(alice, "hello bob")).to_be_visible(timeout=STEP_TIMEOUT_MS)

            step = "bob opens the same conversation and reads it"
            open_chat(bob, "alice")
            expect(message(bob, "hello bob")).to_be_visible(timeout=STEP_TIMEOUT_MS)

            step = "alice sees the read mark"
            expect(message(alice, "hello bob").locator(".mark")).to_have_text("✓✓ read", timeout=STEP_TIMEOUT_MS)

            step = "alice sees bob typing"
            bob.type("#text", "hi al", delay=50)
            expect(alice.locator("#typing")).to_contain_text("bob is typing", timeout=STEP_TIMEOUT_MS)

            step = "bob sends; alice receives live and the indicator goes"
            bob.press("#text", "Enter")
            expect(message(alice, "hi al")).to_be_visible(timeout=STEP_TIMEOUT_MS)
            expect(alice.locator("#typing")).to_have_text("", timeout=STEP_TIMEOUT_MS)

            step = "alice leaves; bob sends while she is away"
            alice.goto("about:blank")
            send(bob, "while you were away")
            expect(message(bob, "while you were away")).to_be_visible(timeout=STEP_TIMEOUT_MS)

            step = "alice comes back (same tab session) and catches up"
            alice.goto(base + "/")
            expect(alice.locator("#me")).to_have_text("alice", timeout=STEP_TIMEOUT_MS)
            expect(message(alice, "while you were away")).to_be_visible(timeout=STEP_TIMEOUT_MS)
            expect(message(alice, "hello bob")).to_be_visible(timeout=STEP_TIMEOUT_MS)

            step = "bob sees his last message read after alice's return"
            expect(message(bob, "while you were away").locator(".mark")).to_have_text(
                "✓✓ read", timeout=STEP_TIMEOUT_MS)

            step = "alice reloads and the socket comes back live"
            alice.reload()
            expect(alice.locator("body")).to_have_attribute("data-socket", "open", timeout=STEP_TIMEOUT_MS)
            send(bob, "after the reload")
            expect(message(alice, "after the reload")).to_be_visible(timeout=STEP_TIMEOUT_MS)
        except Exception as error:  # noqa: BLE001 - report the step, then fail
            print(f"web chat: FAILED at step '{step}': {error}", file=sys.stderr)
            for page, name in ((alice, "alice"), (bob, "bob")):
                print(f"--- {name}'s page text:\n{page.inner_text('body') if page.url.startswith('https') else page.url}",
                      file=sys.stderr)
            browser.close()
            sys.exit(1)
        browser.close()
    print(f"web chat: all steps passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
