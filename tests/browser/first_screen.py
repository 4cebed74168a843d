#!/usr/bin/python3
"""Open a plumb HTML report in headless Chromium at 1280x800, as a DBA's laptop shows it, and
print one JSON object of what the first screen holds: where the verdict block ends against the
window's height, the verdict's text, and whether the page had to scroll to show it.
Saves the first screen as a PNG when SHOT is given.

usage: first_screen.py REPORT.html [SHOT.png]
"""
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing left in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import chromium  # noqa: E402

from selenium.webdriver.common.by import By

report = sys.argv[1]
shot = sys.argv[2] if len(sys.argv) > 2 else None

d = chromium()
out = {}
try:
    d.get("file://" + report)
    out["inner_height"] = d.execute_script("return window.innerHeight")
    out["inner_width"] = d.execute_script("return window.innerWidth")
    out["scroll_y"] = d.execute_script("return window.scrollY")
    v = d.find_elements(By.ID, "verdict")
    if v:
        r = d.execute_script("var b = arguments[0].getBoundingClientRect(); "
                             "return [b.top, b.bottom, b.width]", v[0])
        out["verdict_top"], out["verdict_bottom"], out["verdict_width"] = r
        out["verdict_text"] = v[0].text
        # Lines cut with an ellipsis keep their whole text in the title.
        out["verdict_lines"] = [e.get_attribute("title") for e in
                                v[0].find_elements(By.CSS_SELECTOR, ".line")]
        out["experiment_lines"] = [e.get_attribute("title") for e in
                                   v[0].find_elements(By.CSS_SELECTOR, ".line.exp")]
    # What else is above the fold: the first heading after the verdict.
    out["first_h2"] = d.execute_script(
        "var h = document.querySelector('h2'); return h ? h.textContent : null")
    if shot:
        d.save_screenshot(shot)
finally:
    d.quit()
print(json.dumps(out))
