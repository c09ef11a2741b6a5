{"k":2,"s":"red"}
SELECT TOP @k * FROM c WHERE ARRAY_CONTAINS(c.tags, @s)