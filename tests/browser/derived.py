#!/usr/bin/python3
"""Open a plumb report in headless Chromium and print, as one JSON object, what the page's
charts of derived series (`plumb report --series`) drew: per chart its id, title, and per series
its label and the values uPlot holds, with the x values (Unix seconds). Saves a screenshot of
the first derived chart when SHOT is given.

usage: derived.py REPORT.html [SHOT.png]
"""
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing left in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import chromium  # noqa: E402

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

report = sys.argv[1]
shot = sys.argv[2] if len(sys.argv) > 2 else None

d = chromium()
out = {}
try:
    d.get("file://" + report)
    WebDriverWait(d, 60).until(lambda d: d.execute_script("return window.plumbReady === true"))
    out["charts"] = d.execute_script("return plumbCharts.map(u => u.plumb.id)")
    out["derived"] = d.execute_script(
        "return plumbCharts.filter(u => u.plumb.id.indexOf('derived') === 0).map(u => ({"
        "id: u.plumb.id, title: u.plumb.chart.title,"
        "labels: u.series.slice(1).map(s => s.label),"
        "x: u.data[0], values: u.data.slice(1)}))")
    if shot:
        e = d.find_elements(By.CSS_SELECTOR, ".pc")[0]
        d.execute_script("arguments[0].scrollIntoView({block: 'start'}); window.scrollBy(0, -60)", e)
        d.save_screenshot(shot)
finally:
    d.quit()
print(json.dumps(out))
