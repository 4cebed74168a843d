"""What the browser checks share: headless Chromium driven by Selenium (Debian's chromedriver)
at the size a DBA's laptop shows a page, offline."""
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def chromium(width=1280, height=800):
    opts = webdriver.ChromeOptions()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}",
              "--hide-scrollbars", "--disable-background-networking",
              "--disable-component-update", "--no-first-run"]:
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
