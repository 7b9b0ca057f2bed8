from tests.factories import logged_in_user, make_controller


async def test_read_own_controller(runtime, client):
    user_id, headers = await logged_in_user(runtime, client)
    await make_controller(runtime, "ABC123", owner="ana@example.com")
    response = await client.get("/v1/controllers/ABC123", headers=headers)
    assert response.status_code == 200
    assert response.json()["controller"]["user_id"] == user_id
