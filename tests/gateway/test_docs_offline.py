"""``/docs`` works without the internet: Swagger UI's script and style come from the
installed swagger-ui-bundle package, never a CDN."""

from __future__ import annotations

import httpx

from gateway.servers import start_gateway_network


async def test_swagger_ui_is_served_from_the_package() -> None:
    gn = await start_gateway_network()
    try:
        async with httpx.AsyncClient(base_url=gn.url, timeout=20) as http:
            page = await http.get("/docs")
            assert page.status_code == 200
            assert "cdn." not in page.text and "https://" not in page.text
            assert "/docs/assets/swagger-ui-bundle.js" in page.text
            for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
                r = await http.get(f"/docs/assets/{asset}")
                assert r.status_code == 200 and len(r.content) > 10_000
            assert (await http.get("/openapi.json")).json()["info"]["title"] == \
                "siftbus gateway"
    finally:
        await gn.close()
