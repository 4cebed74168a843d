#!/usr/bin/python3
"""Drive a plumb HTML report in headless Chromium with Selenium (chromedriver), as a user would:
hover a chart, drag to zoom (twice), hide a series from the legend, switch the time zone. Prints
one JSON object of what the page showed; tests/together/report_browser.rs asserts on it.

usage: charts.py REPORT.html SHOTS_DIR BURST_UNIX_S
  BURST_UNIX_S: a wall-clock second (Unix time) inside a burst of disk writes.
Runs chromedriver with the environment it is given (TZ picks "this computer's zone").
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

report, shots, burst = sys.argv[1], sys.argv[2], float(sys.argv[3])
out = {}

opts = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,1200",
          "--disable-background-networking", "--disable-component-update", "--no-first-run"]:
    opts.add_argument(a)
# The page must work offline: every request but the file itself would show in the log.
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    t0 = time.time()
    d.get("file://" + report)
    WebDriverWait(d, 120).until(lambda d: d.execute_script("return window.plumbReady === true"))
    out["ready_s"] = round(time.time() - t0, 3)
    out["build_ms"] = d.execute_script("return window.plumbBuildMs")
    out["charts"] = d.execute_script("return plumbCharts.map(u => u.plumb.id)")
    out["points"] = d.execute_script("return plumbCharts[0].data[0].length")
    out["x_label"] = d.execute_script("return plumbCharts[0].axes[0].label")

    def disk():
        return d.execute_script(
            "return plumbCharts.findIndex(u => u.plumb.id.indexOf('disk-') === 0)")

    k = disk()
    out["disk_chart"] = k
    chart = d.find_elements(By.CSS_SELECTOR, ".pc .u-over")[k]
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)

    def px(x):
        """Offset from the chart's centre (what Selenium moves by) to wall-clock second x."""
        return d.execute_script(
            "var u = plumbCharts[arguments[0]]; return u.valToPos(arguments[1], 'x') - u.over.clientWidth / 2",
            k, x)

    def drag(a, b):
        t = time.time()
        ActionChains(d).move_to_element_with_offset(chart, int(px(a)), 0).click_and_hold() \
            .move_to_element_with_offset(chart, int(px(b)), 0).release().perform()
        return time.time() - t

    # Zoom: a twenty-minute window around the burst, then ninety seconds of it.
    out["zoom1_s"] = round(drag(burst - 600, burst + 600), 3)
    out["zoom2_s"] = round(drag(burst - 45, burst + 45), 3)
    out["ranges"] = d.execute_script(
        "return plumbCharts.map(u => [u.scales.x.min, u.scales.x.max])")
    out["visible_points"] = d.execute_script(
        "var u = plumbCharts[arguments[0]], x = u.data[0];"
        "return x.filter(v => v >= u.scales.x.min && v <= u.scales.x.max).length", k)

    # Hover the burst: the tooltip names the time and the values; the other charts' cursors
    # follow.
    ActionChains(d).move_to_element_with_offset(chart, int(px(burst)), 0).perform()
    time.sleep(0.3)
    tips = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".pc-tip") if e.is_displayed()]
    out["tooltips"] = tips
    out["cursor_idx"] = d.execute_script("return plumbCharts.map(u => u.cursor.idx)")
    out["hover_x"] = d.execute_script(
        "var u = plumbCharts[arguments[0]]; return u.data[0][u.cursor.idx]", k)
    d.save_screenshot(shots + "/hover-zoomed.png")

    # Marks: the labels drawn, none overlapping another.
    out["mark_labels"] = d.execute_script("return plumbCharts.map(u => u.plumbLabels || [])")

    # Hide the first series of the disk chart from its legend.
    entry = d.find_elements(By.CSS_SELECTOR, ".pc .uplot")[k].find_elements(
        By.CSS_SELECTOR, ".u-legend .u-series")[1]
    name = entry.text.strip()
    entry.click()
    out["hidden"] = [name, d.execute_script(
        "return plumbCharts[arguments[0]].series.find(s => s.label === arguments[1]).show", k, name)]
    ActionChains(d).move_to_element_with_offset(chart, int(px(burst)), 5).perform()
    time.sleep(0.2)
    out["tooltip_after_hide"] = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".pc-tip")
                                 if e.is_displayed()]

    # Zoom out (double-click) and take the whole day.
    ActionChains(d).double_click(chart).perform()
    time.sleep(0.3)
    out["range_after_reset"] = d.execute_script(
        "return [plumbCharts[0].scales.x.min, plumbCharts[0].scales.x.max]")
    d.execute_script("window.scrollTo(0, 0)")
    d.save_screenshot(shots + "/day.png")

    # The other time zone.
    sel = Select(d.find_element(By.ID, "pc-tz"))
    out["zones"] = [o.text for o in sel.options]
    if len(sel.options) > 1:
        sel.select_by_value("UTC")
        WebDriverWait(d, 60).until(lambda d: d.execute_script("return window.plumbReady === true"))
        out["x_label_utc"] = d.execute_script("return plumbCharts[0].axes[0].label")
    out["ticks"] = d.execute_script(
        "return Array.from(document.querySelectorAll('.pc')).length")
    out["log"] = [e["message"] for e in d.get_log("browser")]
finally:
    d.quit()
print(json.dumps(out))
